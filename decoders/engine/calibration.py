"""The machine's run-to-run noise that widens every spread (`decoders.analysis.calibration`): the
calibration kept for this machine and model, read on the first run; measured by runs of
autoregressive decoding against itself (`tui-decode calibrate`, the app's calibrate screen). A mixin
of `decoders.engine.Engine`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from decoders.analysis.calibration import TOKENS as CALIBRATION_TOKENS
from decoders.analysis.calibration import Calibration
from decoders.core.params import DecodeParams
from decoders.methods.autoregressive import METHOD as AUTOREGRESSIVE

if TYPE_CHECKING:
    from decoders.analysis.summary import Summary
    from decoders.models.family import Family


class Calibrating:
    """The engine's calibration (the engine sets the fields: none read yet)."""

    family: Family
    calibration: Calibration | None
    calibration_note: str | None  # why there is none (`find_calibration`)
    calibration_problem: str | None  # why the file could not be read (damaged, foreign): a note of its own
    _calibration_read: bool

    def machine(self) -> tuple[str, dict[str, str]]:
        """The key this machine's kept measurements go by, and what it is made of."""
        from decoders.models.machine import machine_key, machine_parts

        parts = machine_parts(self.family)
        return machine_key(parts), parts

    def find_calibration(self) -> Calibration | None:
        """The calibration kept for this machine and model, read once (None: none yet, or the
        file could not be read: ``calibration_note`` says which)."""
        if not self._calibration_read:
            from decoders.models.machine import calibration_path, read_calibrations

            self._calibration_read = True
            kept, problem = read_calibrations()
            self.calibration, self.calibration_problem = kept.get(self.machine()[0]), problem
            self.calibration_note = problem or (None if self.calibration is not None else
                                                f"no run-to-run calibration for this machine in {calibration_path()} "
                                                "yet: spreads are step jitter only")
        return self.calibration

    def calibration_params(self, tokens: int = CALIBRATION_TOKENS) -> DecodeParams:
        """What a calibration run decodes: autoregressive decoding, greedy, ``tokens`` tokens."""
        return DecodeParams(method=AUTOREGRESSIVE.name, max_new_tokens=tokens, record=False).validated()

    def keep_calibration(self, summaries: list[Summary]) -> Calibration:
        """The calibration of these autoregressive-against-itself runs (`calibration_params`),
        kept for this machine and used from the next run on. ValueError when fewer than two
        runs measured a speedup; DecodeError when it cannot be written."""
        import datetime

        from decoders.analysis.calibration import run_noise
        from decoders.models.machine import save_calibration

        measured = [s for s in summaries if s.speedup_decode is not None]
        speeds = [float(s.speedup_decode) for s in measured if s.speedup_decode is not None]
        spreads = [float(s.speedup_spread_steps or s.speedup_spread or 0.0) for s in measured]
        key, parts = self.machine()
        calibration = Calibration(
            key=key, machine=parts, measured=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            runs=speeds, step_spreads=spreads, tokens=max((s.tokens for s in measured), default=0),
            prompt_tokens=max((s.prompt_tokens or 0 for s in measured), default=0), noise=run_noise(speeds, spreads))
        save_calibration(calibration)
        self.calibration, self.calibration_note, self._calibration_read = calibration, None, True
        self.calibration_problem = None
        return calibration

    def forget_calibration(self) -> Calibration | None:
        """Runs from now on use no calibration (a calibration's own runs must not be widened);
        returns the one used so far (`use_calibration` puts it back)."""
        old = self.calibration
        self.calibration, self._calibration_read = None, True
        return old

    def use_calibration(self, calibration: Calibration | None) -> None:
        self.calibration, self._calibration_read = calibration, True
