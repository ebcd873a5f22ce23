"""The engine's verify-cost curves T(k): measured once per context bucket at the end of a run,
kept and reused (a mixin of `decoders.engine.Engine`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from decoders.analysis.timing import CURVE_WIDTHS, context_bucket, curve_phase, probe_steps

if TYPE_CHECKING:
    from decoders.backends.runner import KVRunner
    from decoders.core.params import DecodeParams
    from decoders.models.family import Family


class CostCurves:
    """T(k) per context bucket (the engine sets the fields)."""

    family: Family
    main: KVRunner
    _cost_curves: dict[int, list[float]]

    def _run_curve(self, params: DecodeParams, seq: list[int], cancelled: Callable[[], bool] = lambda: False):
        """`cost_curve` for a run of ``params``: none for the baseline method, which verifies
        nothing (its T(k) took 3.3 s of a 13 s `run --method ar --max-new-tokens 2`)."""
        if params.method_def.baseline:
            return None
        return (yield from self.cost_curve(seq, cancelled))

    def cost_curve(self, seq: list[int], cancelled: Callable[[], bool] = lambda: False):
        """The verify-cost curve T(k) at the context of ``seq`` (held in the main cache after a
        run), measured once per context bucket (about 2 s on a small CPU), then reused; None where
        none fits or a cancel came first. A generator (``curve = yield from``): the measurement is
        a phase of its own (`decoders.analysis.timing.curve_phase`), so that a UI shows the run
        done and T(k) being measured, not a run still going."""
        bucket = context_bucket(len(seq))
        if bucket not in self._cost_curves:
            if not seq or len(seq) + CURVE_WIDTHS > self.family.context_length:
                return None
            curve = yield from curve_phase(self.main, seq, cancelled)
            if curve is None:
                return None
            self._cost_curves[bucket] = curve
        return self._cost_curves[bucket] or None

    def known_cost_curve(self, length: int) -> list[float] | None:
        return self._cost_curves.get(context_bucket(length)) or None

    def _probe(self, seq: list[int]) -> list[float]:
        """Milliseconds of a few one-token steps at the end of ``seq`` (`probe_steps`)."""
        return probe_steps(self.main, seq, self.family.context_length)
