"""Switching the model family on the main screen: f picks one, its load runs in the family load
worker (`tui_decode.workers.decode.FamilyLoadWorker`), and the worker's messages land here: the
status line follows the load, and the panes show the family once it has loaded (or the one still
in use when it fails). A mixin for the main screen (`FamilySwitching`)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from decoders.core.errors import DecodeError
from decoders.core.params import METHOD_NAMES
from decoders.records.family_info import FamilyInfo
from tui_decode.screens.pickers import family_picker
from tui_decode.state.loaded_family import helper_description, load_choice_brief
from tui_decode.state.run_summary import short_paths
from tui_decode.state.settings import START_PARAMS, draft_error, runnable_methods
from tui_decode.state.start_method import start_method

if TYPE_CHECKING:
    from textual.app import App
    from textual.notifications import SeverityLevel

    from decoders.models.family import FamilySpec
    from tui_decode.state.loaded_family import LoadedFamily
    from tui_decode.state.settings import Settings
    from tui_decode.widgets import ParamsPane, PromptPane, StatusLine
    from tui_decode.workers.messages import FamilyFailed, FamilyLoaded, FamilyProgress


@runtime_checkable
class FamilyHost(Protocol):
    """What switching families needs from the main screen."""

    spec: FamilySpec | None  # the family asked for
    loaded: LoadedFamily | None  # the family in use
    loading_family: bool
    @property
    def narrow(self) -> bool: ...  # one page at a time (the layout's)
    load_step: tuple[str, float | None, float] | None
    running: bool
    run_after_load: bool  # ctrl+r came before the model: run once it has loaded
    settings: Settings
    status: StatusLine
    prompt_pane: PromptPane
    params_pane: ParamsPane

    @property
    def app(self) -> App[Any]: ...
    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None: ...
    def apply_settings(self, settings: Settings) -> None: ...
    def report_error(self, message: str) -> None: ...
    def load_in_background(self, spec: FamilySpec) -> object: ...  # the worker (FamilyLoadWorker)
    def action_run(self) -> None: ...
    def start_loading(self, spec: FamilySpec) -> None: ...


#: Seconds a load step may go without a word before the status line counts them.
QUIET_STEP = 2.0
#: The palette command that measures the family's dtype and draft again (`action_remeasure`).
REMEASURE_COMMAND = "Measure dtype and draft again"


class FamilySwitching:
    """f picks a family; the load's progress, success and failure shown."""

    loaded: LoadedFamily | None  # the host's (`FamilyHost`): declared so that assigning it here does not narrow it

    load_step: tuple[str, float | None, float] | None = None  # the last progress: text, fraction, when

    def start_loading(self: FamilyHost, spec: FamilySpec) -> None:
        if self.loading_family:
            self.notify("A model family is already loading.", severity="warning")
            return
        self.loading_family = True
        self.load_step = (f"loading {spec.label or spec.name}", 0.0, time.monotonic())
        self.status.set(f"loading {spec.label or spec.name} …", "busy", 0.0)
        self.prompt_pane.show_family(
            self.loaded.engine.family.describe() if self.loaded else FamilyInfo(label=spec.label or spec.main),
            note=f"loading {spec.name} …")
        self.load_in_background(spec)

    def on_family_progress(self: FamilyHost, event: FamilyProgress) -> None:
        if self.loading_family:
            self.load_step = (event.text, event.fraction, time.monotonic())
            self.status.set(event.text, "busy", event.fraction)

    def load_tick(self: FamilyHost) -> None:
        """A load step that has said nothing for `QUIET_STEP` seconds (the imports, a GGUF's
        metadata, the int4 draft's quantizing): the status line counts its seconds."""
        if not self.loading_family or self.load_step is None:
            return
        text, fraction, since = self.load_step
        waited = time.monotonic() - since
        if waited >= QUIET_STEP:
            self.status.set(f"{text.removesuffix(' …')} … {waited:.0f} s", "busy", fraction)

    def on_family_loaded(self: FamilyHost, event: FamilyLoaded) -> None:
        self.loading_family = False
        self.loaded = loaded = event.loaded
        self.spec = loaded.spec or self.spec
        described = loaded.engine.family.describe()
        self.prompt_pane.show_family(described, threads=loaded.threads)
        self.prompt_pane.set_counter(lambda text, template: len(loaded.engine.family.encode_prompt(text, template)))
        self.params_pane.draft_options = loaded.draft_options()
        self.params_pane.helper_label = helper_description(described)
        self.apply_settings(self.settings.replace(**loaded.start_draft()))
        options = loaded.draft_options()
        unable = self.settings.params.method if draft_error(self.settings, options, loaded.label) else None
        if unable is not None:  # nothing drafts here (llama.cpp without a GGUF helper): a method that can run
            runnable = runnable_methods(options)
            self.apply_settings(self.settings.with_params(method="pld" if "pld" in runnable else runnable[0]))
        free = None if unable is not None else start_method(self.settings.params, START_PARAMS,
                                                             loaded.engine.family.draft_choice)
        if free is not None:  # the chosen draft is not predicted to pay here: the first run shows what does
            self.apply_settings(self.settings.with_params(method=free[0]))
        method = METHOD_NAMES[self.settings.params.method]
        ready = f"ready: {loaded.label} on {described.device} · {described.dtype}; ctrl+r runs {method}"
        if unable is not None:
            ready += f" ({METHOD_NAMES[unable].lower()} decoding needs a draft model, and this family has none)"
        if free is not None:
            ready += f" ({short_paths(free[1])})" if not self.narrow else " (no model draft pays here)"
        if not self.narrow:  # (at 80 columns the status line holds one line: the help says it there)
            ready += f" · {calibration_words(loaded.engine)}"
        note = loaded.engine.family.choice_note
        if self.spec is not None and self.spec.remeasure:  # measured again once, not at every later load
            self.spec = replace(self.spec, remeasure=False)
        brief = load_choice_brief(loaded.engine.family)
        if note and loaded.engine.family.choice_reused:  # old news: one short line
            if self.narrow:
                ready += f" · dtype and draft {note}"
            else:
                self.notify(f'Target dtype and draft {note} (ctrl+p: "{REMEASURE_COMMAND}")', timeout=6)
        elif brief is not None and self.narrow:
            # One page at a time: a toast would cover the page (the Output page, its legend) and
            # the status line for its seconds; the status line itself says it, in a few words.
            ready += f" · {brief}"
        elif brief is not None:  # the default measured its dtype and drafts: which won, and why
            choices = [f"{what}: {short_paths(choice)}"
                       for what, choice in (("Target dtype", described.dtype_choice), ("Draft", described.draft_choice))
                       if choice]
            self.notify("\n".join(choices) or brief, title="Chosen on this machine", timeout=8)
        self.status.set(ready, "idle")
        problem = loaded.engine.calibration_problem
        if problem:  # a damaged file: said as `tui-decode run` says it, left as it is (n replaces it)
            self.notify(f"{problem} (n calibrates)", title="Calibration not read", severity="warning", timeout=10)
        if self.run_after_load:
            self.run_after_load = False
            self.action_run()

    def on_family_failed(self: FamilyHost, event: FamilyFailed) -> None:
        self.loading_family = False
        self.run_after_load = False
        self.report_error(event.error)
        if self.loaded is not None:
            self.prompt_pane.show_family(self.loaded.engine.family.describe(), threads=self.loaded.threads)
            self.spec = self.loaded.spec
            self.status.set(f"could not load {event.spec.name}; still using {self.loaded.label}", "error")
        else:
            self.prompt_pane.show_family(None, note=f"{event.spec.name} failed to load; f picks another")

    def action_remeasure(self: FamilyHost) -> None:
        """Load the family again, measuring the dtype and draft it chooses ('fastest') afresh on this
        machine instead of reusing the kept choice; the new choice is kept for later starts."""
        if self.running or self.loading_family:
            self.notify("Wait for the current run or load to end (escape cancels a run).", severity="warning")
            return
        from decoders.models.drafts import Fastest

        spec = self.spec
        if spec is None or (spec.dtype != "fastest" and not isinstance(spec.draft, Fastest)):
            self.notify("This family fixes its dtype and draft: there is nothing to measure again.",
                        severity="warning")
            return
        self.start_loading(replace(spec, remeasure=True))

    def action_pick_family(self: FamilyHost) -> None:
        if self.running or self.loading_family:
            self.notify("Wait for the current run or load to end (escape cancels a run).", severity="warning")
            return
        try:
            from decoders.models.families import all_families, config_path

            families = all_families()
        except DecodeError as error:
            self.report_error(str(error))
            return
        current = self.spec.name if self.spec is not None else None

        def picked(name: str | None) -> None:
            if name is not None and name in families:
                self.start_loading(families[name])

        self.app.push_screen(family_picker(families, current, config_path()), picked)


def calibration_words(engine) -> str:
    """What the spreads hold on this machine: its run-to-run noise calibrated (when), or not yet."""
    calibration = engine.calibration
    if calibration is None and engine.calibration_problem:
        return "spreads are step jitter only (the calibration file is damaged): n calibrates again"
    if calibration is None:
        return "spreads are step jitter only: n calibrates this machine's run-to-run noise"
    return f"spreads cover a second run (calibrated {calibration.measured[:10]})"
