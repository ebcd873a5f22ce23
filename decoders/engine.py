"""The engine: a loaded model family, its runners, and the baselines already measured on it.

`Engine.stream` is what the app's worker and the command line consume: it validates the input,
reuses (or runs once) the autoregressive baseline for the prompt and settings, then runs the
method, yielding progress and iteration records as they happen, and finally a `RunResult`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterator, Union

from decoders.errors import DecodeError
from decoders.events import PhaseStarted, Progress
from decoders.methods.autoregressive import autoregressive
from decoders.methods.common import DecodeContext, MethodGen
from decoders.methods.jacobi import jacobi
from decoders.methods.prompt_lookup import prompt_lookup
from decoders.methods.speculative import speculative
from decoders.params import DecodeParams
from decoders.records import Iteration, Run, RunResult
from decoders.runner import KVRunner
from decoders.summary import summarize

if TYPE_CHECKING:
    from decoders.family import Family

Event = Union[PhaseStarted, Progress, Iteration, RunResult]

METHODS: dict[str, Callable[[DecodeContext], MethodGen]] = {
    "ar": autoregressive,
    "spec": speculative,
    "pld": prompt_lookup,
    "jacobi": jacobi,
}


class Engine:
    """Runs methods on one loaded family; models stay loaded and baselines are measured once."""

    def __init__(self, family: Family, clock: Callable[[], float] | None = None):
        self.family = family
        self.clock = clock
        self.main = KVRunner(family.main, clock)
        self.helper = KVRunner(family.helper, clock) if family.helper is not None else None
        self._baselines: dict[tuple, Run] = {}

    @property
    def baselines_measured(self) -> int:
        return len(self._baselines)

    def prompt_ids(self, prompt: str, params: DecodeParams) -> list[int]:
        """Token ids of the prompt, checked against the model's context."""
        if not prompt.strip():
            raise DecodeError("the prompt is empty; type a prompt (or give --prompt TEXT / --prompt-file PATH)")
        ids = self.family.encode_prompt(prompt, params.chat_template)
        context = self.family.context_length
        if len(ids) >= context:
            raise DecodeError(f"the prompt is {len(ids)} tokens, the model's context is {context}; shorten the prompt")
        if len(ids) + params.max_new_tokens > context:
            raise DecodeError(f"the prompt ({len(ids)} tokens) plus max_new_tokens ({params.max_new_tokens}) exceeds "
                              f"the model's context of {context}; set max_new_tokens to {context - len(ids)} or less")
        return ids

    def check(self, prompt: str, params: DecodeParams) -> tuple[DecodeParams, list[int]]:
        """Validate everything up front, so that bad input fails before any model time is spent."""
        params = params.validated()
        if params.method == "spec" and self.helper is None:
            raise DecodeError(f"{self.family.label} has no helper model, so speculative decoding is unavailable; "
                              "give --helper SRC or --self-draft-layer L, or pick --method pld / jacobi")
        return params, self.prompt_ids(prompt, params)

    def stream(self, prompt: str, params: DecodeParams,
               cancelled: Callable[[], bool] = lambda: False) -> Iterator[Event]:
        """Progress, iterations and finally the `RunResult` (partial, ``finish: cancelled``, when
        ``cancelled()`` turned true during the method run; nothing when during the baseline)."""
        params, ids = self.check(prompt, params)
        key = (tuple(ids), params.baseline_key())
        baseline = self._baselines.get(key)
        yield PhaseStarted("baseline", "Autoregressive baseline", params.max_new_tokens, cached=baseline is not None)
        if baseline is None:
            base_params = params.replace(method="ar", record=False)
            baseline = yield from self._drive(autoregressive, ids, base_params, cancelled, "baseline")
            if baseline.finish == "cancelled":
                return
            self._baselines[key] = baseline
        method = METHODS[params.method]
        yield PhaseStarted("method", params.method, params.max_new_tokens)
        run = yield from self._drive(method, ids, params, cancelled, "method")
        yield RunResult(method=run, baseline=baseline, summary=summarize(run, baseline, params),
                        params=params.to_json(), prompt=prompt, prompt_ids=ids, family=self.family.describe())

    def run(self, prompt: str, params: DecodeParams) -> RunResult:
        """The whole run at once (command line, tests, benchmarks)."""
        for event in self.stream(prompt, params):
            if isinstance(event, RunResult):
                return event
        raise RuntimeError("the engine finished without a result")

    def _drive(self, method, ids: list[int], params: DecodeParams, cancelled, phase: str):
        """Run one method from an empty cache (every run pays its own prefill: fair timings)."""
        self.main.reset()
        if self.helper is not None:
            self.helper.reset()
        clock = self.main.clock
        ctx = DecodeContext(self.family, ids, params, self.main, self.helper if method is speculative else None,
                            clock, cancelled)
        gen = method(ctx)
        try:
            while True:
                it = next(gen)
                if phase == "method":
                    yield it
                else:
                    yield Progress(phase, it.pos + len(it.emit), params.max_new_tokens)
        except StopIteration as stop:
            return stop.value
