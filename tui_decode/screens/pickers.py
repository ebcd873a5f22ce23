"""Modal lists: the model family to switch to, the saved run to open, and the prompt to start from."""

from __future__ import annotations

import time
from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from tui_decode.state.token_text import shown_controls


class Picker(ModalScreen[str | None]):
    """A titled option list; enter picks (the option's id is the result), escape closes."""

    BINDINGS = [Binding("escape", "dismiss_none", "Close")]

    def __init__(self, title: str, options: list[Option], note: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.options = options
        self.note = note

    def compose(self) -> ComposeResult:
        with Vertical(classes="picker"):
            yield Label(self.title_text, classes="picker-title")
            yield OptionList(*self.options)
            if self.note:
                yield Label(self.note, classes="picker-note")

    def action_dismiss_none(self) -> None:
        self.dismiss(None)

    @on(OptionList.OptionSelected)
    def picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)


def family_picker(families: dict, current: str | None, config_file: Path) -> Picker:
    """Pick a model family: the built-in ones and those of the user's config file."""
    from decoders.models.drafts import HelperModel
    from decoders.models.sources import available_offline

    options = []
    for name, spec in families.items():
        source = spec.draft.source if isinstance(spec.draft, HelperModel) else None
        offline = all(available_offline(src) for src in (spec.main, source) if src)
        helper = draft_line(spec.draft)
        line = Text()
        line.append(("● " if name == current else "  ") + shown_controls(name), style="bold")
        line.append(f"  {shown_controls(spec.label or spec.main)}")
        line.append("  ✓ offline" if offline else "  ⇣ needs a download", style="dim" if offline else "italic")
        line.append(shown_controls(f"\n    main {spec.main}" + (f" · helper {helper}" if helper else "") +
                                   f" · {spec.device}/{spec.dtype}"), style="dim")
        options.append(Option(line, id=name))
    return Picker("Switch model family", options, note=shown_controls(f"more families: {config_file}"))


def draft_line(draft) -> str | None:
    """What drafts for a family as its picker line says it: a helper model's source, "early exit @
    layer 20", "int4 self-draft" (any other kind: "<kind> self-draft"); None: nothing drafts."""
    from decoders.models.drafts import EarlyExit, HelperModel

    if draft is None:
        return None
    if isinstance(draft, HelperModel):
        return draft.source
    if isinstance(draft, EarlyExit):
        return draft.view()
    return f"{draft.kind} self-draft"


#: The answer of `replace_edits_picker` that opens the run.
OPEN_ANYWAY = "open"


def replace_edits_picker(name: str) -> Picker:
    """Ask before a saved run replaces the prompt and parameters the user edited; keeping them
    comes first (enter on it, or escape, keeps them)."""
    options = [Option(Text.assemble(("Keep my edits", "bold"), ("  and do not open the run", "dim")), id="keep"),
               Option(Text.assemble((f"Open {name}", "bold"),
                                    ("  replacing the edited prompt and parameters with the run's", "dim")),
                      id=OPEN_ANYWAY)]
    return Picker("The prompt or parameters were edited and not run", options,
                  note="opening a saved run shows its own prompt and parameters")


def run_picker(runs: list[Path], folder: Path) -> Picker:
    """Pick a saved run, newest first."""
    options = []
    for path in runs:
        stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(path.stat().st_mtime))
        options.append(Option(Text.assemble((shown_controls(path.name), "bold"), (f"  {stamp}", "dim")), id=str(path)))
    return Picker("Open a saved run", options, note=f"runs saved with ctrl+s in {folder}")


class PromptPicker(Picker):
    """The prompt library: enter puts the prompt in the Prompt pane, ctrl+r puts it there and runs
    (the result is ``run:`` and the prompt's key)."""

    BINDINGS = [Binding("escape", "dismiss_none", "Close"),
                Binding("ctrl+r", "pick_and_run", "Pick and run", priority=True)]

    def action_pick_and_run(self) -> None:
        options = self.query_one(OptionList)
        index = options.highlighted
        if index is not None:
            self.dismiss(f"run:{options.get_option_at_index(index).id}")


def prompt_picker(prompts: list, problems: list[str], folder: Path) -> PromptPicker:
    """Pick a prompt: the shipped Spec-Bench prompts by task group (copy-heavy groups first, where
    prompt lookup pays most), then the user's own files."""
    options: list[Option] = []
    for prompt in prompts:
        head = shown_controls(" ".join(prompt.text.split()))
        line = Text.assemble((f"{prompt.group}", "bold"), f"  {shown_controls(prompt.name)}\n    ",
                             (head[:70] + ("…" if len(head) > 70 else ""), "dim"))
        options.append(Option(line, id=prompt.key))
    note = shown_controls(f"enter picks · ctrl+r picks and runs · your own prompts: *.txt in {folder}")
    if problems:
        note += " · not read: " + "; ".join(problems)[:200]
    return PromptPicker("Start from a prompt (Spec-Bench, by task group)", options, note=note)


def open_prompt_library(main) -> None:
    """p on the main screen: the prompt library; the picked prompt replaces the Prompt pane's text
    (ctrl+r in the list also runs it)."""
    from tui_decode.state.prompt_library import library, prompts_dir

    prompts, problems = library()
    if not prompts:
        main.report_error("no prompts to pick: " + ("; ".join(problems) or "the library is empty"))
        return
    by_key = {p.key: p for p in prompts}

    def picked(key: str | None) -> None:
        prompt = by_key.get((key or "").removeprefix("run:"))
        if key is None or prompt is None:
            return
        main.prompt_pane.text = prompt.text
        main.notify(f"Prompt: {prompt.group} {prompt.name}", timeout=3)
        if key.startswith("run:"):
            main.action_run()

    main.app.push_screen(prompt_picker(prompts, problems, prompts_dir()), picked)
