"""Prompt lookup: the n-gram that matched and where in the prompt (or the output) the copied tokens
came from."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.style import Style
from rich.text import Text

from decoders.records.run import Iteration
from tui_decode.state.token_text import real_text
from tui_decode.widgets.details.base import DetailContext, StyleOf, draft_table, flat, register_view

PROMPT_CONTEXT_CHARS = 36


@register_view("lookup")
def lookup_view(it: Iteration, match: Any, context: DetailContext, style: StyleOf) -> list[RenderableType]:
    if match is None:
        return [Text("\nNo n-gram of the sequence's tail occurred earlier, so nothing was copied: "
                     "this iteration was a plain step.", style="dim")]
    source = "the prompt" if match.in_prompt else "the output so far"
    if match.in_prompt:
        where = f"token {match.start} of the prompt"
    elif context.prompt_tokens is None:
        where = "an earlier output token"
    else:
        where = f"output token {match.start - context.prompt_tokens}"
    # The n-gram quoted, its spaces kept: "matched 1-gram  with in ..." read as a stray double space.
    head = Text("\nmatched ", style=style("heading"))
    head.append(f"{match.n}-gram \"")
    head.append(flat("".join(match.ngram)), style=style("match"))
    head.append(f"\" in {source}; the copy starts at {where}")
    return [head, match_context(it, match, context, style), draft_table(it, style)]


def match_context(it: Iteration, match: Any, context: DetailContext, style: StyleOf) -> Text:
    """The matched n-gram and the copied tokens, in the text they were found in."""
    ngram = "".join(real_text(t) for t in match.ngram)
    copied = "".join(real_text(r.text) for r in it.draft)
    line = Text("  ")
    if match.in_prompt:
        haystack = context.prompt
        at = haystack.find(ngram + copied) if copied else -1
        if at < 0:
            at = haystack.find(ngram)
        if at < 0:
            line.append("(the match lies in the chat template around the prompt)", style="dim")
            return line
        before = haystack[max(0, at - PROMPT_CONTEXT_CHARS):at]
        after_start = at + len(ngram)
        tail = haystack[after_start:after_start + max(len(copied), 1) + PROMPT_CONTEXT_CHARS]
        copy_part, rest = tail[:len(copied)], tail[len(copied):]
        line.append(("…" if at > PROMPT_CONTEXT_CHARS else "") + flat(before), style="dim")
    elif context.prompt_tokens is None:
        line.append("(the surrounding output is shown when the run ends)", style="dim")
        return line
    else:
        out_tokens = context.output_tokens
        start = match.start - context.prompt_tokens
        before = "".join(real_text(t) for t in out_tokens[max(0, start - match.n - 8):start - match.n])
        copy_part = "".join(real_text(t) for t in out_tokens[start:start + len(it.draft)])
        rest = ""
        line.append("…" + flat(before), style="dim")
    line.append(flat(ngram), style=style("match"))
    line.append(flat(copy_part), style=style("acc") + Style(underline=True))
    line.append(flat(rest) + ("…" if rest else ""), style="dim")
    return line
