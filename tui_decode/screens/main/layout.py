"""How the main screen fits the terminal: three layouts chosen from its width.

- narrow (below `NARROW_BELOW` columns): one page at a time -- Setup (prompt and parameters),
  Output (the stream and the iteration table), Detail, Statistics -- picked on a row of tabs
  (tab focuses it, ← → switch) or by focusing any pane (e, d, enter on a row, a run starting);
- regular: the parameters column on the left, output, iterations and detail on the right;
- wide (from `WIDE_FROM` columns): the same with a wider left column and a taller detail.

The layout is a CSS class on the screen (`-narrow`, `-regular`, `-wide`) plus, when narrow, the
page's class (`-page-setup` ...); app.tcss holds the rules. No widget moves in the DOM, so a pane
keeps its state (scroll, cursor, content) across a resize.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

from textual import events
from textual.widget import Widget
from textual.widgets import Tab, Tabs

if TYPE_CHECKING:
    from tui_decode.widgets import AppFooter

NARROW_BELOW = 120
WIDE_FROM = 180
LAYOUTS = ("narrow", "regular", "wide")
#: The narrow layout's pages: (id, tab label, the ids of the panes on it).
PAGES = (
    ("setup", "Setup", ("prompt-pane", "params-pane", "value-editor")),
    ("output", "Output", ("token-stream", "iteration-table")),
    ("detail", "Detail", ("iteration-detail",)),
    ("stats", "Statistics", ("stats-pane",)),
)
PAGE_OF_PANE = {pane: page for page, _, panes in PAGES for pane in panes}
#: The pane of each page that takes the focus when the tabs lose it to a wider layout.
FOCUS_OF_PAGE = {"setup": "params-pane", "output": "token-stream", "detail": "iteration-detail",
                 "stats": "stats-pane"}


def layout_for(width: int) -> str:
    """The layout for a terminal ``width`` columns wide."""
    if width < NARROW_BELOW:
        return "narrow"
    return "wide" if width >= WIDE_FROM else "regular"


def page_tabs() -> Tabs:
    """The narrow layout's row of page tabs (hidden in the other layouts)."""
    return Tabs(*[Tab(label, id=page) for page, label, _ in PAGES], active="setup", id="pages")


def page_of(widget: Widget | None) -> str | None:
    """The narrow page that shows ``widget`` (a pane or anything inside one)."""
    node = widget
    while node is not None:
        page = PAGE_OF_PANE.get(node.id or "")
        if page is not None:
            return page
        node = node.parent if isinstance(node.parent, Widget) else None
    return None


@runtime_checkable
class LayoutHost(Protocol):
    """What `ResponsiveLayout`'s methods use: the mixin's own members and, from the screen it is
    mixed into, its focus, its CSS classes and the ``footer`` and ``page_tabs`` it composed."""

    layout_name: str
    page: str
    footer: AppFooter
    page_tabs: Tabs

    @property
    def focused(self) -> Widget | None: ...
    def set_class(self, add: bool, *class_names: str, update: bool = True) -> object: ...
    def call_after_refresh(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> bool: ...
    def query_one(self, selector: str) -> Widget: ...
    def set_focus(self, widget: Widget | None, scroll_visible: bool = True) -> None: ...
    def apply_layout(self, width: int) -> None: ...
    def focus_page_pane(self) -> None: ...
    def show_page(self, page: str) -> None: ...


class ResponsiveLayout:
    """Mixin for the main screen: sets the layout class on resize and the page when narrow."""

    layout_name: str = ""
    page: str = "setup"

    def apply_layout(self: LayoutHost, width: int) -> None:
        name = layout_for(width)
        if name != self.layout_name:
            self.layout_name = name
            for other in LAYOUTS:
                self.set_class(other == name, f"-{other}")
            self.footer.narrow = name == "narrow"
            if name == "narrow":
                self.show_page(page_of(self.focused) or self.page)
            else:  # the page tabs are hidden now: they must not keep the focus (nothing would answer keys)
                self.call_after_refresh(self.focus_page_pane)

    def focus_page_pane(self: LayoutHost) -> None:
        """Focus the shown page's pane when the focus is on the hidden page tabs, or lost with them."""
        if self.focused is None or self.focused is self.page_tabs:
            # the screen's own focus: this screen may be under a modal (the history) as it resizes
            self.set_focus(self.query_one(f"#{FOCUS_OF_PAGE.get(self.page, 'params-pane')}"))

    def show_page(self: LayoutHost, page: str) -> None:
        """Show ``page`` (narrow layout); the tabs follow."""
        self.page = page
        for other, _, _ in PAGES:
            self.set_class(other == page, f"-page-{other}")
        tabs = self.page_tabs
        if tabs.active != page:
            tabs.active = page

    @property
    def narrow(self) -> bool:
        return self.layout_name == "narrow"

    def on_resize(self: LayoutHost, event: events.Resize) -> None:
        self.apply_layout(event.size.width)

    def on_descendant_focus(self: LayoutHost, event: events.DescendantFocus) -> None:
        if event.widget is not self.focused:  # the focus has moved on since (e.g. the screen's first focus)
            return
        page = page_of(event.widget)
        if page is not None and page != self.page:
            self.show_page(page)

    def on_tabs_tab_activated(self: LayoutHost, event: Tabs.TabActivated) -> None:
        """A tab chosen on the row shows its page. Two events are not choices: one for a tab no
        longer active (posted before `show_page` moved the tabs on), and the tabs going back to
        their first tab when they mount after a pane on another page took the focus; following
        either would swap the page back and forth for as long as the app runs."""
        tab, tabs = event.tab.id, event.tabs
        if tabs.id != "pages" or not tab or tab == self.page or tab != tabs.active:
            return
        if page_of(self.focused) not in (None, tab):
            tabs.active = self.page
            return
        self.show_page(tab)
