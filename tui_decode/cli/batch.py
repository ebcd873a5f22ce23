"""`tui-decode bench --batch 1,2,4`: the batch bench (`decoders.bench.batch`), its input checked
before the model loads and its memory before the first batch."""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

from decoders.core.errors import DecodeError
from tui_decode.cli.views import BenchArgs


def cmd_batch_bench(args: BenchArgs, prompts, kept=None, take_out: Callable[[], None] | None = None) -> int:
    """``kept``: the ``--suffix-memory`` file as `tui_decode.cli.bench` checked it (None: none given).
    ``take_out``: takes the --out folder's lock (one bench writes a folder at a time), called once
    the input is checked, before any model loads. With ``--backends``: the batch bench on each
    backend, one report (`decoders.bench.batch_multi`)."""
    from rich.console import Console

    from decoders.bench.batch import check_batches, parse_batches, row_specs, run_batch_bench
    from decoders.bench.batch_report import render_markdown, write_batch_report
    from decoders.bench.machine import BatchMachine, load_average
    from decoders.bench.prompts import select_prompts
    from decoders.core.host_memory import host_available_memory
    from decoders.core.params import DecodeParams
    from decoders.records.atomic import check_folder_destination
    from tui_decode.cli.bench import _check_counts
    from tui_decode.cli.synthetic import synthetic_grid

    assert args.batch is not None, "cmd_bench calls this for --batch only"
    batches = parse_batches(args.batch)
    from decoders.bench.variants import parse_variants

    if args.sweep is not None:
        raise DecodeError("--batch and --sweep do not go together; drop one of the two")
    backends = _backends(args)
    grid = synthetic_grid(args)
    if grid is not None and backends is not None:
        raise DecodeError("--synthetic-grid measures the synthetic draft on one backend; drop --backends (give "
                          "--backend NAME for one) or drop --synthetic-grid")
    methods = (args.methods or ("ar" if grid is not None else "ar,pld")).split(",")
    if "synthetic" in methods:
        raise DecodeError("--batch measures the synthetic draft with --synthetic-grid A[,A...][:G..G], not as one of "
                          "--methods; give e.g. --methods ar --synthetic-grid 0.5,0.7,0.9:1..8")
    variants = parse_variants(args.variants) if args.variants is not None else None
    if not args.out.strip():
        raise DecodeError("--out is empty; give the report folder (it is created if missing)")
    check_folder_destination(args.out, "--out", "the report")
    _check_counts(args)
    chosen = dict(args.params)
    params = DecodeParams(method="pld", max_new_tokens=args.max_new_tokens, record=False, **chosen).validated()
    # refused here, before the model loads; suffix decoding's k is its --suffix-max
    lengths = {"suffix": params.suffix_max}
    specs = row_specs(methods, params.num_pred, params.draft_policy, variants, lengths)
    widest = max([params.num_pred, *(spec.k for spec in specs), *(grid.gammas if grid is not None else [])])
    spec = any(s.method == "spec" for s in specs)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    import torch

    from decoders.models.machine import cpu_features

    if take_out is not None:
        take_out()  # the --out folder's lock, before any model loads
    before = load_average()
    families, unloaded = _load(args, backends, spec, Console(stderr=True))
    questions = select_prompts(prompts, args.limit)
    ids = {}
    available = host_available_memory()
    for backend, family in families.items():
        ids[backend] = [family.encode_prompt(p.text, True) for p in questions]
        longest = max(len(i) for i in ids[backend])
        if longest + args.max_new_tokens > family.context_length:
            raise DecodeError(f"the longest prompt ({longest} tokens) plus --max-new-tokens ({args.max_new_tokens}) "
                              f"exceeds the model's context of {family.context_length}"
                              f"{f' on {backend}' if backends else ''}; lower --max-new-tokens")
        check_batches(family, batches, longest, args.max_new_tokens, widest + 1, available,
                      spec=spec and backend not in unloaded)
    first = next(iter(families))
    suffix, notes = _suffix_shape(families[first], args, params, ids[first], kept,
                                  any(s.method == "suffix" for s in specs))

    def progress(message: str) -> None:
        print(f"bench: {message}", file=sys.stderr, flush=True)

    model, flags = cpu_features()
    machine = BatchMachine(cpu=model, vector=flags, cpus=os.cpu_count(), threads=torch.get_num_threads(),
                           load_before=before)
    shared: dict[str, Any] = dict(rounds=max(2, args.repeats), k=params.num_pred, progress=progress, machine=machine,
                  policy=params.draft_policy, variants=variants, suffix=suffix, lengths=lengths)
    if backends is None:
        report = run_batch_bench(families[first], ids[first], batches, methods, args.max_new_tokens,
                                 synthetic=grid, **shared)
    else:
        from decoders.bench.batch_multi import run_batch_backends

        report = run_batch_backends(families, ids, batches, methods, args.max_new_tokens, unloaded=unloaded,
                                    questions=[(p.question_id, p.category) for p in questions],
                                    **shared)
    report.notes += notes
    report.machine.load_after = load_average()
    md, js = write_batch_report(report, args.out)
    print(render_markdown(report))
    print(f"report written to {md} and {js} ({report.elapsed_s:.0f} s)", file=sys.stderr)
    return 0


def _backends(args: BenchArgs) -> tuple[str, ...] | None:
    """``--backends LIST`` checked (None: one backend), before any model loads."""
    if args.backends is None:
        return None
    from decoders.bench.multi import parse_backends

    backends = parse_backends(args.backends)
    if args.model.backend:
        raise DecodeError("give either --backend NAME or --backends LIST, not both")
    return backends


def _load(args: BenchArgs, backends, spec: bool, console) -> tuple[dict, dict[str, str]]:
    """The family of each backend (one: keyed ""), and per backend why its draft was not loaded:
    on several backends a draft one cannot run (a trained head or the int4 self-draft on llama.cpp)
    is left out of that backend's family, its spec rows then left out of its lane, saying why
    (`decoders.bench.batch_multi`); on one, refused in one line as before."""
    from dataclasses import replace

    from decoders.models.llamacpp_family import check_backend
    from tui_decode.cli.main import family_spec, load_with_progress

    if backends is None:
        family = load_with_progress(family_spec(args.model), console)
        if spec:
            from decoders.bench.batch_spec import check_spec

            check_spec(family)
        return {"": family}, {}
    wanted, unloaded = {}, {}
    for backend in backends:  # every backend's checked before any model loads
        wanted[backend] = family_spec(replace(args.model, backend=backend))
        try:
            check_backend(wanted[backend])
        except DecodeError as exc:
            if wanted[backend].draft is None:
                raise
            wanted[backend] = replace(wanted[backend], draft=None)
            check_backend(wanted[backend])  # the main model's own refusal stands
            unloaded[backend] = str(exc)
    return {backend: load_with_progress(s, console) for backend, s in wanted.items()}, unloaded


def _suffix_shape(family, args, params, ids, kept, used: bool):
    """The suffix rows' depth, factor, minimum probability and, with ``--suffix-memory``, the
    memory they read (`decoders.methods.batch.suffix.memory_tree`: its responses to the bench's
    prompts left out), with the report's note on it; the file is checked now the model has loaded
    (refused in one line when damaged, foreign or over its bound) and never written; not read
    where no row is a suffix row (``used`` False)."""
    from decoders.methods.batch.suffix import SuffixShape, memory_tree

    if args.suffix_memory is None or not used:
        return SuffixShape(params.suffix_depth, params.suffix_factor, params.suffix_min_prob), []
    from decoders.methods.shared.suffix_memory import prompt_key, read_memory

    memory = read_memory(family, args.suffix_memory, params.suffix_depth, args.suffix_memory_mb, kept)
    keys = {prompt_key(i) for i in ids}
    left_out = sum(e.prompt in keys for e in memory.entries.values())
    note = (f"suffix rows drafted from the memory {args.suffix_memory}: {len(memory) - left_out} responses, read only "
            f"({left_out} to the bench's own prompts left out)")
    print(f"bench: {note}", file=sys.stderr, flush=True)
    return SuffixShape(params.suffix_depth, params.suffix_factor, params.suffix_min_prob,
                       memory_tree(memory, ids, params.suffix_depth)), [note]
