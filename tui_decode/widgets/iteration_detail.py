"""Everything one iteration recorded, laid out for its method.

Speculative: the top-5 of p (target) and q (helper) at each draft position as bars, so one sees
why a draft passed or failed. Prompt lookup: the n-gram that matched and where in the prompt (or
the output) the copied tokens came from. Jacobi: the block of guesses before and the model's
answers after, with how many became fixed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.console import Group, RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from decoders.params import METHOD_NAMES
from decoders.records import Iteration, TopEntry
from tui_decode.session import real_text
from tui_decode.widgets.styles import component_style

BAR_WIDTH = 12
STATUS_WORDS = {"acc": "accepted", "rej": "rejected", "unv": "not reached"}
PROMPT_CONTEXT_CHARS = 36


@dataclass
class DetailContext:
    """What the detail needs beside the iteration: the method and where the tokens sit."""

    method: str = "ar"
    prompt: str = ""
    prompt_tokens: int | None = 0  # None while the run streams (the engine reports it at the end)
    output_tokens: list[str] = field(default_factory=list)  # display text of each emitted token


def prob_bar(prob: float, width: int = BAR_WIDTH) -> str:
    """A probability as a bar of eighth blocks, ``width`` cells for 1.0."""
    eighths = round(max(0.0, min(prob, 1.0)) * width * 8)
    full, part = divmod(eighths, 8)
    return ("█" * full + (" ▏▎▍▌▋▊▉"[part] if part else "")).ljust(width)


def fmt_prob(value: float | None) -> str:
    return "  -  " if value is None else f"{value:.3f}"


class IterationDetail(VerticalScroll, can_focus=True):
    """The selected iteration in full; a hint when nothing is selected yet."""

    ALLOW_MAXIMIZE = True  # enter on a table row (or d) shows it full screen
    COMPONENT_CLASSES = {
        "iteration-detail--acc",
        "iteration-detail--rej",
        "iteration-detail--unv",
        "iteration-detail--bar-p",
        "iteration-detail--bar-q",
        "iteration-detail--chosen",
        "iteration-detail--heading",
        "iteration-detail--match",
    }

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.iteration: Iteration | None = None
        self.context = DetailContext()

    def compose(self):
        self.body = Static(id="detail-body")
        yield self.body

    def on_mount(self) -> None:
        self._refresh_body()

    def show(self, iteration: Iteration | None, context: DetailContext) -> None:
        self.iteration = iteration
        self.context = context
        self._refresh_body()

    def _style(self, name: str) -> Style:
        return component_style(self, f"iteration-detail--{name}")

    def _refresh_body(self) -> None:
        if not self.is_mounted:
            return
        body = self.body
        it = self.iteration
        if it is None:
            body.update(Text("Select an iteration in the table (or move the cursor in the output) to see "
                             "what was drafted and how it was verified.", style="dim"))
            self.border_title = "Iteration detail"
            return
        self.border_title = f"Iteration {it.k} · {METHOD_NAMES.get(self.context.method, self.context.method)}"
        parts: list[RenderableType] = [self._summary_line(it)]
        kind = it.detail.kind if it.detail is not None else None
        if kind == "topk":
            parts.extend(self._speculative(it))
        elif kind == "lookup" or (self.context.method == "pld"):
            parts.extend(self._prompt_lookup(it))
        elif kind == "jacobi":
            parts.extend(self._jacobi(it))
        elif it.draft:
            parts.append(self._draft_table(it))
        else:
            parts.append(Text("A plain step: one target forward, one token, nothing drafted.", style="dim"))
        body.update(Group(*parts))
        self.scroll_home(animate=False)

    def _summary_line(self, it: Iteration) -> Text:
        line = Text()
        line.append(f"position {it.pos}", style=self._style("heading"))
        if it.draft:
            line.append(f" · drafted {len(it.draft)}, accepted {it.n_accepted}")
        line.append(f" · emitted {len(it.emit)}: ")
        for n, emitted in enumerate(it.emit):
            if n:
                line.append(" ")
            line.append(emitted.text, style=self._style({"acc": "acc", "fix": "rej"}.get(emitted.kind, "chosen")))
            line.append(f"({emitted.kind})", style="dim")
        timing = f" · verify {it.t_verify_ms:.1f} ms"
        if it.draft:
            timing = f" · draft {it.t_draft_ms:.1f} ms" + timing
        line.append(timing, style="dim")
        return line

    # -- speculative -----------------------------------------------------------------------------
    def _speculative(self, it: Iteration) -> list[RenderableType]:
        top_p = it.detail.p if it.detail is not None else []
        top_q = it.detail.q if it.detail is not None else []
        out: list[RenderableType] = []
        emitted = [e.token for e in it.emit]
        for i in range(len(top_p)):
            row = it.draft[i] if i < len(it.draft) else None
            head = Text()
            if row is not None:
                head.append(f"\n{i + 1}. draft ", style=self._style("heading"))
                head.append(row.text, style=self._style(row.status))
                head.append(f"  {STATUS_WORDS.get(row.status, row.status)}", style=self._style(row.status))
                head.append(f"   q {fmt_prob(row.q)}   p {fmt_prob(row.p)}   accept {fmt_prob(row.acc_prob)}",
                            style="dim")
            else:
                head.append(f"\n{i + 1}. bonus position", style=self._style("heading"))
                head.append("   every draft passed: the target adds its own next token", style="dim")
            chosen = emitted[i] if i < len(emitted) else None
            grid = Table.grid(padding=(0, 1))
            grid.add_column(width=2)
            grid.add_column(width=12, no_wrap=True, overflow="ellipsis")
            grid.add_column(width=BAR_WIDTH, no_wrap=True)
            grid.add_column(width=5, justify="right")
            grid.add_column(width=2)
            grid.add_column(width=12, no_wrap=True, overflow="ellipsis")
            grid.add_column(width=BAR_WIDTH, no_wrap=True)
            grid.add_column(width=5, justify="right")
            ps = top_p[i]
            qs = top_q[i] if i < len(top_q) else []
            draft_token = row.token if row is not None else None
            for rank in range(max(len(ps), len(qs))):
                cells: list[RenderableType] = []
                for label, entries, bar_style in (("p", ps, "bar-p"), ("q", qs, "bar-q")):
                    entry: TopEntry | None = entries[rank] if rank < len(entries) else None
                    cells.append(Text(label if rank == 0 else "", style="bold"))
                    if entry is None:
                        cells.extend([Text(""), Text(""), Text("")])
                        continue
                    mark = self._style("chosen") if entry.token in (chosen, draft_token) else Style()
                    cells.append(Text(entry.text, style=mark))
                    cells.append(Text(prob_bar(entry.prob), style=self._style(bar_style)))
                    cells.append(Text(f"{entry.prob:.2f}"))
                grid.add_row(*cells)
            out.extend([head, grid])
        out.append(Text("\np: target model's top-5   q: helper's top-5   bold: the draft / the emitted token",
                        style="dim"))
        return out

    # -- prompt lookup ---------------------------------------------------------------------------
    def _prompt_lookup(self, it: Iteration) -> list[RenderableType]:
        match = it.detail if it.detail is not None and it.detail.kind == "lookup" else None
        if match is None:
            return [Text("\nNo n-gram of the sequence's tail occurred earlier, so nothing was copied: "
                          "this iteration was a plain step.", style="dim")]
        source = "the prompt" if match.in_prompt else "the output so far"
        if match.in_prompt:
            where = f"token {match.start} of the prompt"
        elif self.context.prompt_tokens is None:
            where = "an earlier output token"
        else:
            where = f"output token {match.start - self.context.prompt_tokens}"
        out: list[RenderableType] = []
        head = Text("\nmatched ", style=self._style("heading"))
        head.append(f"{match.n}-gram ")
        head.append("".join(match.ngram), style=self._style("match"))
        head.append(f" in {source}; the copy starts at {where}")
        out.append(head)
        out.append(self._match_context(it))
        out.append(self._draft_table(it))
        return out

    def _match_context(self, it: Iteration) -> Text:
        """The matched n-gram and the copied tokens, in the text they were found in."""
        match = it.detail if it.detail is not None and it.detail.kind == "lookup" else None
        ngram = "".join(real_text(t) for t in match.ngram)
        copied = "".join(real_text(r.text) for r in it.draft)
        line = Text("  ")
        if match.in_prompt:
            haystack = self.context.prompt
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
            line.append(("…" if at > PROMPT_CONTEXT_CHARS else "") + _flat(before), style="dim")
        elif self.context.prompt_tokens is None:
            line.append("(the surrounding output is shown when the run ends)", style="dim")
            return line
        else:
            out_tokens = self.context.output_tokens
            start = match.start - self.context.prompt_tokens
            before = "".join(real_text(t) for t in out_tokens[max(0, start - match.n - 8):start - match.n])
            copy_part = "".join(real_text(t) for t in out_tokens[start:start + len(it.draft)])
            rest = ""
            line.append("…" + _flat(before), style="dim")
        line.append(_flat(ngram), style=self._style("match"))
        line.append(_flat(copy_part), style=self._style("acc") + Style(underline=True))
        line.append(_flat(rest) + ("…" if rest else ""), style="dim")
        return line

    # -- Jacobi ----------------------------------------------------------------------------------
    def _jacobi(self, it: Iteration) -> list[RenderableType]:
        block = it.detail
        table = Table(box=None, padding=(0, 1), show_edge=False, pad_edge=False)
        table.add_column("", style="bold")
        for n in range(len(block.before)):
            table.add_column(str(n + 1), no_wrap=True, overflow="ellipsis", max_width=14)
        statuses = [r.status for r in it.draft]
        table.add_row("before", *[Text(t[1], style=self._style(s)) for t, s in zip(block.before, statuses)])
        table.add_row("after", *[Text(t[1]) for t in block.after])
        table.add_row("", *[Text(STATUS_WORDS.get(s, s), style=self._style(s)) for s in statuses])
        note = Text(f"\nblock of {len(block.before)} guesses → {block.fixed} fixed: the leading guesses the model "
                    "reproduced, then its own next token; the answers after the first miss become the next "
                    "iteration's guesses.", style="dim")
        return [Text(""), table, note]

    # -- any drafted block -----------------------------------------------------------------------
    def _draft_table(self, it: Iteration) -> Table:
        table = Table(box=None, padding=(0, 1), show_edge=False, pad_edge=False, header_style="bold")
        for name in ("#", "token", "status", "q", "p", "accept"):
            table.add_column(name, justify="right" if name in ("#", "q", "p", "accept") else "left")
        for n, row in enumerate(it.draft):
            style = self._style(row.status)
            table.add_row(str(n + 1), Text(row.text, style=style), Text(STATUS_WORDS.get(row.status, ""), style=style),
                          fmt_prob(row.q), fmt_prob(row.p), fmt_prob(row.acc_prob))
        return table


def _flat(text: str) -> str:
    """Text on one line: newlines shown as the "↵" the tables use."""
    return text.replace("\n", "↵")
