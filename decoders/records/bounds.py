"""The range each number of a saved run can take, declared once and checked by msgspec when a run
is read (never when one is made: a run the tool decodes is what it measured).

Every figure is measured or counted, so each has a bound. A hand-edited or crafted file's 1e308,
5e-324 or 10**400 would otherwise overflow to infinity or NaN in the arithmetic that shows it
("infx slower", "nanx slower", a crash in the plot or the acceptance bars), far from the file.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

import msgspec

MAX_MS = 1e10  # milliseconds in one phase of a run: 115 days
MAX_COUNT = 2**40  # tokens, positions, forwards, iteration indexes
MAX_TOKEN_ID = 2**31 - 1  # a vocabulary's ids
MIN_RATIO, MAX_RATIO = 1e-6, 1e6  # a speedup, drift or cost in one-token forwards
MAX_FIGURE = 1e12  # any other figure a method adds (a method's extras, read as plain JSON)
#: A run emits at most max_new_tokens tokens, whose bound this is (`decoders.core.declarations`;
#: a test checks they agree), each iteration at least one: the most tokens and iterations a saved
#: run may hold, so a crafted file of a million one-token iterations is not laid out in the app.
MAX_TOKENS = 131072

Prob = Annotated[float, msgspec.Meta(ge=0.0, le=1.001)]  # a probability, rounding allowed for
Ms = Annotated[float, msgspec.Meta(ge=0.0, le=MAX_MS)]
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]
TokenId = Annotated[int, msgspec.Meta(ge=0, le=MAX_TOKEN_ID)]
#: A ratio of two speeds or step times: one of 0 cannot have been measured (and every "x faster /
#: x slower" divides by it), nor can one of 1e-300.
Ratio = Annotated[float, msgspec.Meta(ge=MIN_RATIO, le=MAX_RATIO)]
#: A spread, tokens per forward, an acceptance length, a cost: not negative, not astronomical.
Positive = Annotated[float, msgspec.Meta(ge=0.0, le=MAX_RATIO)]
#: One entry per token of a run (its ids, kinds, iteration of each, texts); its iterations.
PerToken = msgspec.Meta(max_length=MAX_TOKENS)
PerIteration = msgspec.Meta(max_length=MAX_TOKENS + 1)
#: The rows of one iteration (drafted and emitted tokens, top-k lists, a detail's lists): the
#: widest step a method takes (prompt lookup's 16 branches of 64 tokens) is 1024 rows.
MAX_STEP = 4096
PerStep = msgspec.Meta(max_length=MAX_STEP)
#: No terminal control character (C0, DEL, C1): a run keeps a token's display form, where they
#: are made visible ("<0x1B>", "↵"), and its labels are the tool's own words; in a crafted file an
#: ESC sequence would reach the terminal as the app draws it (set its title, write its clipboard).
NO_CONTROL = "^[^\x00-\x1f\x7f-\x9f]*$"
#: A token's text (a tokenizer's pieces are a few bytes; a 100 MB one would be folded line by line).
TokenText = Annotated[str, msgspec.Meta(max_length=MAX_STEP, pattern=NO_CONTROL)]
#: A label, a method's name, why a run or a draft stopped, the explanation: the tool's own words.
Label = Annotated[str, msgspec.Meta(max_length=MAX_STEP, pattern=NO_CONTROL)]
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
#: The prompt, as long as a prompt file may be (`decoders.records.inputs.MAX_PROMPT_BYTES`), and its ids.
MAX_PROMPT = 4 << 20
Prompt = Annotated[str, msgspec.Meta(max_length=MAX_PROMPT)]
PerPromptToken = msgspec.Meta(max_length=MAX_PROMPT)


#: Bytes of memory the app holds per byte of the saved run it shows, at the peak of opening the
#: densest run the records allow (one-token iterations, 131072 of them a side) and comparing it
#: with its baseline; measured, then rounded up (docs/results/2026-12-02-large-saved-runs.md).
MEMORY_PER_BYTE = 16
#: The most a saved run may be however much memory is free: the longest budget of the widest
#: method is far smaller, and reading it takes seconds on a small machine.
RUN_BYTES_CAP = 256 << 20


def max_run_bytes(available: int | None = None) -> int:
    """The largest saved run this machine can open: what its free memory holds at
    `MEMORY_PER_BYTE`, at most `RUN_BYTES_CAP`. ``available``: free bytes (None: ask the system)."""
    from decoders.core.host_memory import host_available_memory

    free = host_available_memory() if available is None else available
    return RUN_BYTES_CAP if free is None else max(min(RUN_BYTES_CAP, free // MEMORY_PER_BYTE), 1 << 20)


def size_refusal(path: object, size: int | None, bound: int, available: int | None = None) -> str:
    """The line that refuses a saved run of ``size`` bytes (None: past ``bound``, size unknown)."""
    from decoders.core.host_memory import format_bytes, host_available_memory

    free = host_available_memory() if available is None else available
    what = f"is {format_bytes(size)}" if size is not None else f"is larger than {format_bytes(bound)}"
    if bound < RUN_BYTES_CAP and free is not None:
        why = (f"the app holds about {MEMORY_PER_BYTE} bytes of memory per byte of a run, and "
               f"{format_bytes(free)} is free: close other programs to open it")
    else:
        why = "the most a saved run may be"
    return f"{path} {what}, more than the {format_bytes(bound)} a saved run may be here ({why})"


def unbounded_figure(value: Any, at: str) -> str | None:
    """Where in ``value`` (plain JSON: a method's own figures, the family, the parameters) a number
    lies outside ±`MAX_FIGURE`, or is a float too small to divide by (0 < |x| < 1e-12), or a text
    holds a control character (see `NO_CONTROL`); None when nowhere."""
    if isinstance(value, str):
        control = _CONTROL.search(value)
        return f"{at} holds a control character ({control.group(0)!r})" if control else None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return None if abs(value) <= MAX_FIGURE else f"{at} is {str(value)[:20]}…, past ±{MAX_FIGURE:g}"
    if isinstance(value, float):
        if not math.isfinite(value) or abs(value) > MAX_FIGURE or 0 < abs(value) < 1 / MAX_FIGURE:
            return f"{at} is {value!r}, outside the ±{MAX_FIGURE:g} a figure can take (or 0)"
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = unbounded_figure(item, f"{at}.{key}" if isinstance(key, str) else f"{at}[{key}]")
        if found:
            return found
    return None
