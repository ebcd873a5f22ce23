"""`tui-decode replay`: recorded responses replayed through suffix decoding's trees (and prompt
lookup's n-grams) with no model: tau, acceptance by position and a cost-aware predicted speedup per
request and overall (`decoders.bench.replay`), to tune depth, factor and minimum probability before
spending model time. The requests are a train-head corpus folder (the model's own answers, token
ids: no tokenizer needed) or saved runs (RUN.json, their prompt and the method's output), in order,
as one session: each response joins the memory before the next request."""

from __future__ import annotations

import argparse

from decoders.core.errors import DecodeError
from tui_decode.cli.numbers import bounded_int

MAX_REQUESTS = 100_000
MAX_RUN_FILES = 10_000
METHODS = ("suffix", "prompt_lookup")


def bounded_float(flag: str, low: float, high: float):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} takes a number in {low:g}..{high:g}, got {text[:40]!r}") from None
        if not low <= value <= high:  # NaN fails here too
            raise argparse.ArgumentTypeError(f"{flag} must be in {low:g}..{high:g}, got {text[:40]}")
        return value

    return parse


def add_replay_parser(sub) -> None:
    p = sub.add_parser("replay", help="replay recorded responses through suffix decoding's trees, no model: tau, "
                                      "acceptance by position, predicted speedup")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--corpus", metavar="PATH", help="a train-head corpus folder (prompts and the model's answers)")
    src.add_argument("--runs", nargs="+", metavar="RUN.json", help="saved runs, replayed in the order given")
    p.add_argument("--memory", metavar="PATH", help="start from this suffix memory file (e.g. a datastore; not "
                                                    "written: the replay's responses join a copy)")
    p.add_argument("--limit", type=bounded_int("--limit", 1, MAX_REQUESTS), default=None, metavar="N",
                   help=f"the first N requests only (1..{MAX_REQUESTS})")
    p.add_argument("--skip", type=bounded_int("--skip", 0, MAX_REQUESTS), default=0, metavar="N",
                   help="join the first N requests' responses to the memory without replaying them (a datastore)")
    p.add_argument("--depth", type=bounded_int("--depth", 2, 64), default=24, metavar="N", help="tree depth (2..64)")
    p.add_argument("--factor", type=bounded_float("--factor", 0.1, 8.0), default=1.0, metavar="F",
                   help="draft at most F x the matched suffix's length (0.1..8)")
    p.add_argument("--min-prob", type=bounded_float("--min-prob", 0.0, 1.0), default=0.1, metavar="P",
                   help="stop the draft where the product of branch frequencies falls below P (0..1)")
    p.add_argument("--max-draft", type=bounded_int("--max-draft", 1, 64), default=16, metavar="K",
                   help="at most K tokens drafted per step (1..64)")
    p.add_argument("--slope", type=bounded_float("--slope", 0.0, 2.0), default=0.05, metavar="S",
                   help="a verify forward over k positions costs 1 + S x (k - 1) one-token steps (0..2, default "
                        "0.05, a guess: read T(k)'s slope over T(1) off a run's cost curve on your machine)")
    p.add_argument("--request-only", action="store_true", help="suffix: draft from this request only, no memory")
    p.add_argument("--per-request", action="store_true", help="print a line per request")


def _requests(args) -> list[tuple[list[int], list[int]]]:
    from pathlib import Path

    if args.corpus is not None:
        from decoders.training.corpus import INDEX, META, Corpus

        folder = Path(args.corpus)
        if not (folder / META).exists() or not (folder / INDEX).exists():
            raise DecodeError(f"{args.corpus} is not a train-head corpus folder (no {META} and {INDEX}); give one, "
                              "or saved runs with --runs")
        corpus = Corpus(folder)
        out = []
        for s in corpus.samples:
            ids = corpus.ids(s)
            out.append((ids[:s.n_prompt], ids[s.n_prompt:]))
        return out
    if len(args.runs) > MAX_RUN_FILES:
        raise DecodeError(f"{len(args.runs)} run files, more than {MAX_RUN_FILES}; replay fewer")
    from decoders.records.run import RunResult

    return [(r.prompt_ids, r.method.ids) for r in (RunResult.load(p) for p in args.runs)]


def cmd_replay(args: argparse.Namespace) -> int:
    from decoders.bench.replay import ReplayParams, replay, totals
    from decoders.methods.shared.suffix_memory import SuffixMemory, check_memory_file
    from tui_decode.cli.main import stdout_console

    requests = _requests(args)
    memory = SuffixMemory(args.depth, max_requests=10**9, max_nodes=10**12)
    if args.memory:
        kept = check_memory_file(args.memory, "--memory")  # whole (its digest); whose, not told without a model
        for prompt, tokens in kept.responses if kept is not None else []:  # None: an empty file
            memory.add(prompt, tokens)
    for _, response in requests[:args.skip]:
        memory.add("", response)
    chosen = requests[args.skip:]
    if args.limit is not None:
        chosen = chosen[:args.limit]
    if not chosen:
        raise DecodeError(f"no request left to replay ({len(requests)} read, --skip {args.skip}); skip fewer")
    out = stdout_console()
    base = dict(depth=args.depth, factor=args.factor, min_prob=args.min_prob, max_draft=args.max_draft,
                slope=args.slope)
    rows = [("suffix" + (" (this request only)" if args.request_only else ""),
             ReplayParams(**base, memory=not args.request_only)),
            ("prompt lookup", ReplayParams(**base, method="prompt_lookup"))]
    start = len(memory)
    out.print(f"{len(chosen)} requests replayed in order, {sum(len(r) for _, r in chosen)} response tokens; memory "
              f"of {start} responses at the start; depth {args.depth}, factor {args.factor:g}, min prob "
              f"{args.min_prob:g}, k <= {args.max_draft}, verify cost 1 + {args.slope:g} x (k - 1)",
              markup=False, highlight=False, soft_wrap=True)
    for name, params in rows:
        copy = SuffixMemory(args.depth, max_requests=10**9, max_nodes=10**12)
        for e in memory.entries.values():
            copy.add(e.prompt, e.tokens)
        records = replay(chosen, params, copy)
        total = totals(records)
        half = len(records) // 2
        early, late = totals(records[:half]), totals(records[half:])
        acc = total.acceptance
        positions = ", ".join(f"{a / d:.2f}" for d, a in total.by_position[:8] if d)
        out.print(f"{name}: tau {total.tau:.2f}, predicted speedup {total.speedup:.2f}x, acceptance "
                  f"{'-' if acc is None else f'{acc:.2f}'} ({total.accepted}/{total.drafted} drafted), "
                  + (f"{total.from_memory / total.accepted:.0%} of accepted from the memory, "
                     if params.method == "suffix" and total.accepted else "")
                  + f"first half tau {early.tau:.2f} / second half {late.tau:.2f}; acceptance by position "
                  f"[{positions}]; drafting {total.draft_ms / max(total.tokens, 1):.3f} ms a token",
                  markup=False, highlight=False, soft_wrap=True)
        if args.per_request:
            for r in records:
                out.print(f"  request {r.index + args.skip}: {r.tokens} tokens in {r.steps} steps, tau {r.tau:.2f}, "
                          f"predicted {r.speedup:.2f}x, accepted {r.accepted}/{r.drafted}",
                          markup=False, highlight=False)
    return 0
