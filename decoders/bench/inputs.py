"""What every bench run starts from: its methods and parameters checked, its prompts selected and
tokenized (those that do not fit the context skipped, with a note), and the small pieces its
progress and records share. Used by the suite and the runs on several backends (`decoders.bench.lanes`)
and by the sweep (`decoders.bench.sweep`); both reports record every decoding parameter in their
settings, as ``decode_params``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from decoders.bench.common import BASELINE
from decoders.bench.prompts import BenchPrompt, PromptRecord, select_prompts
from decoders.core.declarations import method_names
from decoders.core.errors import DecodeError
from decoders.core.params import DecodeParams

if TYPE_CHECKING:
    from decoders.models.family import Family


ProgressFn = Callable[[str], None]
Prepared = list[tuple[BenchPrompt, list[int]]]


def parse_methods(text: str | Iterable[str] | None) -> tuple[str, ...]:
    """"ar,spec,pld" -> (BASELINE, "spec", "pld") in the registry's order; autoregressive always comes
    first (it is the baseline). None: every registered method."""
    known = method_names()
    if text is None:
        text = known
    names = [m.strip() for m in (text.split(",") if isinstance(text, str) else text) if m.strip()]
    if not names:
        raise DecodeError(f"no methods given; pass --methods as a comma-separated list of {', '.join(known)}")
    unknown = [m for m in names if m not in known]
    if unknown:
        raise DecodeError(f"unknown method {unknown[0]!r} in --methods; choose from {', '.join(known)}")
    return tuple([BASELINE] + [m for m in known if m in names and m != BASELINE])


def base_params(params: DecodeParams | None, max_new_tokens: int, repeats: int) -> DecodeParams:
    """The greedy, unrecorded parameters every run starts from; checks ``repeats`` too."""
    if not isinstance(repeats, int) or repeats < 1:
        raise DecodeError(f"repeats must be an integer >= 1, got {repeats!r}; set --repeats to 1 or more")
    base = (params or DecodeParams()).replace(max_new_tokens=max_new_tokens, mode="greedy", record=False)
    return base.replace(method=BASELINE).validated()


def prepare(family: Family, prompts: Sequence[BenchPrompt], limit: int | None, base: DecodeParams,
            notes: list[str]) -> Prepared:
    """Selected prompts with their token ids; prompts that do not fit the context are skipped."""
    from decoders.engine import Engine

    if limit is not None and limit < 1:
        raise DecodeError(f"limit must be an integer >= 1, got {limit}; set --limit to 1 or more")
    probe = Engine(family, pairing="sequential")
    runnable = []
    for prompt in select_prompts(prompts, limit):
        try:
            runnable.append((prompt, probe.prompt_ids(prompt.text, base)))
        except DecodeError as exc:
            notes.append(f"{prompt.name} ({prompt.category}) skipped: {exc}")
    if not runnable:
        raise DecodeError("none of the prompts fits the model's context with this token budget; "
                          "lower --max-new-tokens or use shorter prompts")
    return runnable


def shortest(runnable: Prepared) -> tuple[BenchPrompt, list[int]]:
    """The prompt to warm up on: the shortest one, so that warming up costs little."""
    return min(runnable, key=lambda item: len(item[1]))


def head(number: int, total: int, prompt: BenchPrompt) -> str:
    """The progress prefix of one prompt run: "[3/12] q81 writing"."""
    return f"[{number}/{total}] {prompt.name} {prompt.category}"


def prompt_records(runnable: Prepared) -> list[PromptRecord]:
    return [prompt.record(len(ids)) for prompt, ids in runnable]


def created() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")
