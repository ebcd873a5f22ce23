"""The key every screen shows in the same place: ctrl+q, the app's quit."""

from __future__ import annotations

from textual.binding import Binding

#: Bound on the app (its action), and listed again first on the screens whose footer shows it:
#: a footer lists the screen's keys before the app's, and ctrl+q has always come first.
QUIT = Binding("ctrl+q", "app.quit", "Quit", priority=True, tooltip="Quit at once, even mid-run")
