"""`tui-decode run`: decode one prompt headless, beside its autoregressive baseline, and print the
output and the figures (or write the whole run as JSON). Every flag is checked before any model
loads; the prompt is warmed up untimed before the timed runs (`decoders.engine.Engine.warm`).
"""

from __future__ import annotations

import argparse
import sys

from decoders.core.errors import DecodeError
from tui_decode.cli.datastore import add_memory_mb_arg
from tui_decode.cli.model_args import add_model_args, add_remeasure_arg, family_spec
from tui_decode.cli.numbers import MAX_REPEATS, bounded_int
from tui_decode.cli.views import RunArgs


def add_run_parser(sub) -> None:
    from tui_decode.cli.main import add_decode_args, add_threads_arg

    run = sub.add_parser("run", help="decode one prompt headless and print the figures (or the run as JSON)")
    src = run.add_mutually_exclusive_group()
    src.add_argument("--prompt", help="the prompt text")
    src.add_argument("--prompt-file", metavar="PATH", help="read the prompt from a file")
    run.add_argument("--json", metavar="PATH", help="write the whole run as JSON to PATH (- for stdout)")
    run.add_argument("--repeats", type=bounded_int("--repeats", 1, MAX_REPEATS), default=1, metavar="N",
                     help=f"run N times (1..{MAX_REPEATS}) and pool the speedups (each run beside its own baseline)")
    run.add_argument("--pairing", choices=["interleaved", "sequential"], default="interleaved",
                     help="how the baseline is timed: stepped in alternation with the run (default), or decoded "
                          "once before it and rescaled by a probe after it")
    run.add_argument("--suffix-memory", metavar="PATH",
                     help="suffix decoding: keep the memory of earlier responses in PATH (per model and tokenizer), "
                          "read at the start and rewritten after each response; see `tui-decode datastore build`")
    add_memory_mb_arg(run)
    add_threads_arg(run)
    add_model_args(run)
    add_remeasure_arg(run)
    add_decode_args(run)
    from tui_decode.cli.synthetic import add_synthetic_args

    add_synthetic_args(run)


def drafts_for(spec, args: RunArgs):
    """``spec`` for one run of ``args.method``: a method that drafts with nothing (ar, pld, jacobi,
    lookahead) neither measures nor builds a 'fastest' draft (the dtype is chosen alone, or reused
    from the choice kept here), nor the family's own self-draft, which a device map cannot split
    (a draft asked for by a flag is kept, and its conflict said)."""
    from dataclasses import replace

    from decoders.core.declarations import get_method

    if get_method(args.decode.method).needs_helper:
        return spec
    from decoders.models.drafts import Fastest, HelperModel

    if isinstance(spec.draft, Fastest):
        spec = replace(spec, draft=None)
    asked = args.model.self_draft is not None or args.model.self_draft_layer is not None
    if spec.device_map is None or asked or isinstance(spec.draft, HelperModel):
        return spec
    return replace(spec, draft=None)


def cmd_run(namespace: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.panel import Panel
    from rich.text import Text

    from decoders.engine import Engine
    from decoders.records.atomic import check_destination
    from tui_decode.cli.main import (  # looked up when called: the tests stand in for the load
        check_memory_path,
        check_threads,
        decode_params,
        load_with_progress,
        read_prompt,
        set_threads,
        stdout_console,
    )
    from tui_decode.cli.synthetic import synthetic_method
    from tui_decode.state.run_summary import summary_table
    from tui_decode.state.token_text import shown_controls

    args = synthetic_method(RunArgs.of(namespace))  # registers the synthetic draft where its flags ask for it
    err = Console(stderr=True)
    check_threads(args.threads)
    params = decode_params(args.decode, args.decode.method)
    prompt = read_prompt(args.prompt)
    if not prompt.strip():
        raise DecodeError("the prompt is empty; give some text with --prompt or --prompt-file")
    if args.json is not None and not args.json.strip():
        raise DecodeError("--json is empty; give the path of a file to write the run to (or - for stdout)")
    if args.json and args.json != "-":
        check_destination(args.json, "--json", "the run")  # before any model time is spent
    check_memory_path(args.suffix_memory, mb=args.suffix_memory_mb)
    spec = drafts_for(family_spec(args.model), args)  # its flags checked before torch loads
    set_threads(args.threads)
    family = load_with_progress(spec, err)
    memory = None
    if args.suffix_memory:
        from decoders.methods.shared.suffix_memory import open_memory_file

        memory = open_memory_file(family, args.suffix_memory, params.suffix_depth, args.suffix_memory_mb)
        err.print(f"suffix memory: {len(memory)} responses, {memory.tokens} tokens from {args.suffix_memory}",
                  markup=False, highlight=False)
    if family.dtype_choice:
        err.print(f"dtype: {family.dtype_choice['sentence']}", markup=False, highlight=False)
    if family.draft_choice and family.helper is not None:
        err.print(f"draft: {family.draft_choice['sentence']}", markup=False, highlight=False)
    if family.choice_note:
        err.print(f"choice: {family.choice_note} (--remeasure measures again)", markup=False, highlight=False)
    engine = Engine(family, pairing=args.pairing)
    params, _ = engine.check(prompt, params)  # fail on bad input before spending model time
    with err.status("warming up ..."):  # the prompt's first decode, untimed: every run then measures alike
        engine.warm(prompt, params)
    results = []
    for i in range(args.repeats):
        with err.status("decoding ..." if args.repeats == 1 else f"decoding {i + 1}/{args.repeats} ..."):
            results.append(engine.run(prompt, params))
    result = results[-1]
    # the memory's file written after the run, off its clock: a failed write (a read-only folder, a
    # full disk) leaves the run standing; it is said after the figures, as a failed --json is (exit 2)
    unwritten = engine.memory_error if memory is not None else None
    if args.json == "-":
        sys.stdout.write(result.dumps() + "\n")
        if unwritten:
            raise DecodeError(unwritten)
        return 0
    failed: DecodeError | None = None
    if args.json:
        try:
            result.save(args.json)
            err.print(f"run written to {args.json}")
        except DecodeError as exc:  # keep the result: show it, then say what was not written
            failed = exc
    out = stdout_console()
    out.print(Panel(Text(shown_controls(result.method.text)), title="output", title_align="left", expand=False))
    out.print(summary_table(result))
    if len(results) > 1:
        from tui_decode.state.run_summary import pooled_table

        out.print(pooled_table([r.summary for r in results]))
    if failed is not None:
        if unwritten:
            err.print(f"tui-decode: error: {unwritten}", markup=False, highlight=False, soft_wrap=True)
        raise failed
    if unwritten:
        raise DecodeError(unwritten)
    if engine.calibration_note:
        err.print(f"note: {engine.calibration_note}; `tui-decode calibrate` measures the machine's run-to-run "
                  "noise once, and every spread then covers a second run", markup=False, highlight=False,
                  soft_wrap=True)
    return 0

