"""`tui-decode bench`: argument parsing and printing; the benchmark itself lives in the decoders.bench package.

Every input is checked (prompts file, methods, sweep, numbers) before the model loads, so a typo
costs a second, not a model load.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from decoders.core.declarations import all_methods, baseline_method, method_names
from decoders.core.params import DecodeParams, method_param_specs
from tui_decode.cli.main import MAX_THREADS
from tui_decode.cli.views import GRID_TOKENS, BenchArgs, ModelFlags

if TYPE_CHECKING:
    from decoders.methods.shared.suffix_memory import MemoryFile
    from decoders.records.folder import FolderLock

DEFAULT_OUT = "bench-out"
#: Upper bounds of the bench's own counts (the decoding parameters have theirs in their ParamSpecs):
#: beyond these a run would exhaust memory (bandwidth tensor, threads) or never end.
COUNT_BOUNDS = {"limit": 100_000, "repeats": 100, "bandwidth_mb": 16_384, "threads": MAX_THREADS,
                "record_overhead_every": 100_000}


def add_bench_parser(sub) -> None:
    from decoders.bench.session import WORKLOADS
    from decoders.bench.sweep import sweep_names, sweepable
    from decoders.bench.variants import MAX_VARIANTS, Variant, example, shape_items
    from tui_decode.cli.datastore import add_memory_mb_arg
    from tui_decode.cli.main import add_model_args

    d = DecodeParams()
    default_methods = ",".join(method_names())  # every registered method
    declared = [Variant(m.name, v).label for m in all_methods() for v in m.bench_variants]
    sweep_example = next(iter(sweepable()), "NAME")
    p = sub.add_parser("bench", help="Spec-Bench-style benchmark, side by side with transformers",
                       description="Run every method on every prompt of a Spec-Bench JSONL file (first turn, "
                                   "greedy), interleaved with transformers' generate() on the same model, and "
                                   "write report.md and report.json.")
    p.add_argument("--prompts", required=True, metavar="FILE.jsonl",
                   help="Spec-Bench prompts (question_id, category, turns), e.g. bench/spec_bench_dev.jsonl")
    p.add_argument("--methods", default=None, metavar="LIST",
                   help=f"comma-separated methods, each a row as the flags below set it ({default_methods}); ar is "
                        "always run, it is the baseline")
    p.add_argument("--variants", default=None, metavar="LIST",
                   help="more rows, each a method with its own parameters or draft, labelled as written: e.g. "
                        f"'{example()}' (items: int4 or early-exit [L] drafts, "
                        + "".join(f"{item}, " for item in shape_items())
                        + f"or NAME VALUE for a method's parameter; at most {MAX_VARIANTS}). With neither --methods "
                        "nor --variants: every method, a method that drafts with a helper also with each self-draft "
                        f"the family offers, and the variants the methods declare ({', '.join(declared)})")
    p.add_argument("--max-new-tokens", type=int, default=None, metavar="N",
                   help=f"tokens per sequence (default {d.max_new_tokens}; with --synthetic-grid {GRID_TOKENS}, so the "
                        "budget's last chain and the batch's slowest row weigh less)")
    p.add_argument("--limit", type=int, default=None, metavar="N",
                   help="use N prompts, taken round-robin over the task groups (default all)")
    p.add_argument("--repeats", type=int, default=1, metavar="R", help="measure every prompt R times (default 1)")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="DIR", help=f"report folder (default {DEFAULT_OUT}/)")
    p.add_argument("--wait", action="store_true",
                   help="when another bench is writing the same --out, wait for it to end (otherwise: one line "
                        "saying which process, exit 2)")
    p.add_argument("--workload", choices=WORKLOADS, default="prompts",
                   help="prompts (default): each prompt on its own, its first turn; session: the prompts in the "
                        "report's order as one session, every turn of a multi-turn question after the one before "
                        "it, each row that drafts from a memory (suffix) with its own, its answers joining it "
                        "before the next prompt; the report adds the speedup by position (first third against "
                        "last) and per turn")
    p.add_argument("--suffix-memory", metavar="PATH",
                   help="the suffix rows draft from the memory kept in PATH (a datastore from `tui-decode datastore "
                        "build`, or a memory kept by `run --suffix-memory`; for this model), read once at the start; "
                        "the bench measures, it never writes the memory: the file is left as it is (with --workload "
                        "session each memory row starts from its own copy of it; otherwise the bench's answers join "
                        "a copy in memory only; with --batch the suffix rows only read it, its responses to the "
                        "bench's prompts left out). Not with --sweep or --backends")
    add_memory_mb_arg(p)
    p.add_argument("--sweep", metavar="NAME=A..B",
                   help=f"instead of the suite, sweep one parameter ({sweep_names()}) and print measured "
                        f"speedup against the Theorem 3.8 prediction for each value, e.g. {sweep_example}=1..8")
    methods = p.add_argument_group("method parameters")
    for spec in method_param_specs().values():  # every registered method's, from its declaration
        spec.add_argument(methods)
    p.add_argument("--bandwidth-mb", type=int, default=1024, metavar="MB",
                   help="size of the float32 tensor summed to measure memory read bandwidth (default 1024)")
    p.add_argument("--record-overhead-every", type=int, default=3, metavar="K",
                   help="on every K-th prompt also run each drafting method with recording on, to measure what "
                        "recording costs (default 3; 0: never)")
    p.add_argument("--backends", default=None, metavar="LIST",
                   help="run the same GGUF model on each of these backends in one run (torch,llamacpp), every row "
                        "on each, labelled by backend (\"ar [llama.cpp]\"), each beside its own reference: "
                        "transformers' generate() on torch, llama-cpp-python's own loop on llama.cpp; with each "
                        "backend's bandwidth floor and T(k), and the backends' AR outputs compared token by token; "
                        "with --batch, the batch bench on each backend, each with its own T(B, k), in one report")
    p.add_argument("--batch", default=None, metavar="LIST",
                   help="instead of the suite, decode B prompts together for each batch size B in LIST (e.g. 1,2,4; "
                        "each 1..64): prompt lookup, suffix decoding and, with a --helper model, --self-draft "
                        "int4 or --self-draft head on torch, speculative decoding (--methods ar,pld,suffix,spec) "
                        "beside autoregressive decoding at the same batch size, interleaved over max(2, --repeats) "
                        "rounds, with the verify-cost surface T(B, k); "
                        "--draft-policy adaptive picks each iteration's draft length from T(B, k) and the rows' "
                        "acceptance, and --variants 'pld[num_pred 2, draft_policy fixed],pld' sets rows of fixed K "
                        "beside it; with --backends torch,llamacpp, on each backend in one report (a row a backend "
                        "cannot batch left out there, saying why); see tui_decode/cli/batch.py")
    from tui_decode.cli.synthetic import add_synthetic_grid_args

    add_synthetic_grid_args(p)
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="torch CPU threads for both sides (default: torch's own choice); on a machine shared "
                        "with other busy processes, 1 avoids threads spinning against each other")
    add_model_args(p)


def _check_counts(args: BenchArgs) -> None:
    from decoders.core.errors import DecodeError

    for name, flag, value in (("limit", "--limit", args.limit), ("repeats", "--repeats", args.repeats),
                              ("bandwidth_mb", "--bandwidth-mb", args.bandwidth_mb),
                              ("threads", "--threads", args.threads)):
        if value is not None and value < 1:
            raise DecodeError(f"{name} must be an integer >= 1, got {value}; set {flag} to 1 or more")
        high = COUNT_BOUNDS[name]
        if value is not None and value > high:
            raise DecodeError(f"{name} must be an integer <= {high}, got {value}; set {flag} to {high} or less")
    if args.record_overhead_every < 0:
        raise DecodeError(f"record_overhead_every must be an integer >= 0, got {args.record_overhead_every}; "
                          "set --record-overhead-every to 0 (never) or more")
    if args.record_overhead_every > COUNT_BOUNDS["record_overhead_every"]:
        high = COUNT_BOUNDS["record_overhead_every"]
        raise DecodeError(f"record_overhead_every must be an integer <= {high}, got {args.record_overhead_every}; "
                          f"set --record-overhead-every to {high} or less")


def _check_session(args: BenchArgs, prompts) -> None:
    """``--workload session``: alone with the suite, and every later turn of its prompts readable,
    before any model loads."""
    from decoders.bench.prompts import select_prompts, session_turns
    from decoders.core.errors import DecodeError

    for flag, given in (("--sweep", args.sweep), ("--batch", args.batch), ("--backends", args.backends)):
        if given is not None:
            raise DecodeError(f"--workload session and {flag} do not go together: a session runs the suite's rows on "
                              f"one backend; drop one of the two")
    for prompt in select_prompts(prompts, args.limit):
        session_turns(prompt)


def _check_memory(args: BenchArgs) -> MemoryFile | None:
    """``--suffix-memory PATH``: an existing memory file, whole (`run`'s checks: its digest, its
    format), read once before any model loads; alone with the suite."""
    from pathlib import Path

    from decoders.core.errors import DecodeError
    from tui_decode.cli.main import check_memory_path

    if args.suffix_memory is None:
        if args.suffix_memory_mb is not None:
            raise DecodeError("--suffix-memory-mb bounds the memory read with --suffix-memory; give "
                              "--suffix-memory PATH too, or drop --suffix-memory-mb")
        return None
    for flag, given in (("--sweep", args.sweep), ("--backends", args.backends)):
        if given is not None:
            raise DecodeError(f"--suffix-memory and {flag} do not go together: the memory is read for the suite's "
                              f"rows on one backend; drop one of the two")
    if not args.suffix_memory.strip():
        raise DecodeError("--suffix-memory is empty; give the path of a memory file (see `tui-decode datastore build`)")
    if not Path(args.suffix_memory).exists():
        raise DecodeError(f"--suffix-memory {args.suffix_memory} does not exist: the bench reads a memory, it never "
                          "makes one; build one with `tui-decode datastore build` or keep one with "
                          "`tui-decode run --suffix-memory`")
    return check_memory_path(args.suffix_memory, lock=False, mb=args.suffix_memory_mb)


def _backend_specs(model: ModelFlags, backends) -> dict:
    """The FamilySpec of each backend: the model flags with ``--backend`` set to it, each checked
    (a llama.cpp run needs a GGUF file) before anything loads."""
    from dataclasses import replace

    from decoders.models.llamacpp_family import check_backend
    from tui_decode.cli.main import family_spec

    specs = {backend: family_spec(replace(model, backend=backend)) for backend in backends}
    for spec in specs.values():
        check_backend(spec)
    return specs


def cmd_bench(namespace: argparse.Namespace) -> int:
    """One bench writes an --out folder at a time: its lock, taken once the input is checked and
    before the models load, held until the report is written; the temporary files of an
    interrupted bench there are removed first."""
    from decoders.records.folder import FolderLock

    lock = FolderLock(str(namespace.out), "the report folder", wait=bool(namespace.wait),
                      on_wait=lambda line: print(f"bench: {line}", file=sys.stderr, flush=True))
    try:
        return _cmd_bench(namespace, lambda: _take(lock))
    finally:
        lock.release()


def _take(lock: FolderLock) -> None:
    """The report folder's lock; the temporary files of a bench killed there removed, and a report
    it left half written said (this bench replaces it)."""
    from decoders.bench.report_pair import report_pair_problem
    from decoders.records.folder import sweep_temps

    lock.acquire()
    sweep_temps(lock.folder, locked=True)
    problem = report_pair_problem(lock.folder)
    if problem:
        print(f"bench: the report in {lock.folder} was left half written by an interrupted bench ({problem}); "
              "this one replaces it", file=sys.stderr, flush=True)


def _cmd_bench(namespace: argparse.Namespace, take_out: Callable[[], None]) -> int:
    from rich.console import Console

    from decoders.bench import (
        BenchReport,
        SweepReport,
        load_prompts,
        parse_methods,
        parse_sweep,
        parse_variants,
        run_bench,
        run_sweep,
    )
    from decoders.bench.drafts import check_variants
    from decoders.bench.report import (
        agreement_table,
        backends_floor_section,
        backends_table,
        floor_section,
        group_table,
        overall_table,
        position_table,
        sweep_table,
        targets_table,
        turn_table,
        write_report,
    )
    from decoders.core.errors import DecodeError
    from decoders.records.atomic import check_folder_destination
    from tui_decode.cli.main import family_spec, load_with_progress

    args = BenchArgs.of(namespace)
    prompts = load_prompts(args.prompts)
    if args.workload == "session":
        _check_session(args, prompts)
    kept = _check_memory(args)
    from tui_decode.cli.synthetic import synthetic_grid

    synthetic_grid(args)  # a grid or its cost without --batch refused here
    if args.batch is not None:
        from tui_decode.cli.batch import cmd_batch_bench

        return cmd_batch_bench(args, prompts, kept, take_out)
    if not args.out.strip():  # "" is the current folder: its report.md would be written over
        raise DecodeError("--out is empty; give the report folder (it is created if missing), or leave --out out "
                          f"for {DEFAULT_OUT}/")
    check_folder_destination(args.out, "--out", "the report")  # before the benchmark, not after
    methods = parse_methods(args.methods) if args.methods is not None else None
    variants = parse_variants(args.variants) if args.variants is not None else None
    sweep = parse_sweep(args.sweep) if args.sweep else None
    if sweep is not None and variants is not None:
        raise DecodeError("--sweep and --variants do not go together: a sweep varies one parameter of one method; "
                          "drop one of the two")
    _check_counts(args)
    backends = None
    if args.backends is not None:
        from decoders.bench.multi import parse_backends

        backends = parse_backends(args.backends)
        if args.model.backend:
            raise DecodeError("give either --backend NAME or --backends LIST, not both")
        if sweep is not None:
            raise DecodeError("--sweep and --backends do not go together: a sweep varies one parameter on one "
                              "backend; drop one of the two (--backend NAME picks the sweep's)")
    chosen = dict(args.params)
    baseline = baseline_method().name
    params = DecodeParams(method=baseline, max_new_tokens=args.max_new_tokens, record=False, **chosen).validated()
    check_variants(variants or (), params)  # each with the other parameters (e.g. ngram_min <= ngram_max)
    if sweep is not None:  # every swept value with the other parameters (e.g. ngram_min <= ngram_max)
        for value in sweep.values:
            params.replace(method=sweep.method, **{sweep.name: value}).validated()
    take_out()  # the --out folder's lock, before any model loads
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if backends is not None:
        specs = _backend_specs(args.model, backends)  # every backend's checked before any model loads
        families = {backend: load_with_progress(spec, Console(stderr=True)) for backend, spec in specs.items()}
        family = families[backends[0]]
    else:
        family = load_with_progress(family_spec(args.model), Console(stderr=True))
    memory = None
    if args.suffix_memory is not None:
        from decoders.methods.shared.suffix_memory import read_memory

        # whose memory it is, and its bounds, checked now the model has loaded (refused in one line)
        memory = read_memory(family, args.suffix_memory, params.suffix_depth, args.suffix_memory_mb, kept)
        print(f"bench: suffix memory: {len(memory)} responses, {memory.tokens} tokens from {args.suffix_memory} "
              "(read only: the bench never writes it)", file=sys.stderr, flush=True)

    def progress(message: str) -> None:
        print(f"bench: {message}", file=sys.stderr, flush=True)

    report: BenchReport | SweepReport
    if backends is not None:
        from decoders.bench.multi import run_backends

        report = run_backends(families, prompts, methods, args.max_new_tokens, args.limit, args.repeats, progress,
                              params=params, record_overhead_every=args.record_overhead_every,
                              bandwidth_bytes=args.bandwidth_mb << 20, variants=variants)
    elif sweep is not None:
        report = run_sweep(family, prompts, sweep, args.max_new_tokens, args.limit, args.repeats, progress,
                           params=params)
    else:
        report = run_bench(family, prompts, methods, args.max_new_tokens, args.limit, args.repeats, progress,
                           params=params, record_overhead_every=args.record_overhead_every,
                           bandwidth_bytes=args.bandwidth_mb << 20, variants=variants, workload=args.workload,
                           memory=memory)
    from decoders.core.errors import DecodeError

    failed: DecodeError | None = None
    try:
        md, js = write_report(report, args.out)
    except DecodeError as exc:  # keep the measurements: print them, then say what was not written
        failed = exc
    if isinstance(report, SweepReport):
        assert sweep is not None  # the report of a sweep
        print(f"Sweep of {sweep.heading()}: measured speedup against Theorem 3.8\n")
        print(sweep_table(report))
    else:
        if report.sides:
            print("Backends side by side\n")
            print(backends_table(report))
            print("\nMemory-bandwidth floor and verify-cost curve of each backend\n")
            print(backends_floor_section(report))
            print("\nAgreement between the backends' AR outputs\n")
            print(agreement_table(report))
            print()
        print("Overall\n")
        print(overall_table(report))
        print("\nPer task group\n")
        print(group_table(report))
        positions, turns = position_table(report), turn_table(report)
        if positions:
            print("\nBy position in the session (rows that draft from a memory; see report.md)\n")
            print(positions)
        if turns:
            print("\nPer turn\n")
            print(turns)
        print("\nTargets\n")
        print(targets_table(report))
        if not report.sides:
            print("\nMachine: memory-bandwidth floor and verify-cost curve\n")
            print(floor_section(report))
    for note in report.notes:
        print(f"note: {note}", file=sys.stderr)
    if failed is not None:
        raise failed
    print(f"\nreport written to {md} and {js} ({report.elapsed_s:.0f} s)", file=sys.stderr)
    return 0
