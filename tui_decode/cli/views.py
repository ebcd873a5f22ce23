"""Typed views of the parsed command line: each subcommand's flags as a frozen dataclass, built
from argparse's `Namespace` in one place (its ``of``), so that the type checker sees every flag a
command reads and a flag renamed in the parser fails where the view is built, not as a silent
``None`` further on.

A flag a subcommand's parser does not define (train-head has no draft flags) takes the view's
default: that one ``getattr`` by name in `_present` is the only one the command line needs.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields
from typing import Any


def _present(args: argparse.Namespace, names: list[str]) -> dict[str, Any]:
    """``args``' values of ``names``, for those its parser defines."""
    return {name: getattr(args, name) for name in names if hasattr(args, name)}


@dataclass(frozen=True)
class ModelFlags:
    """What to load (`tui_decode.cli.model_args.add_model_args`, ``--remeasure``)."""

    family: str | None = None
    main: str | None = None
    helper: str | None = None
    self_draft_layer: int | None = None
    self_draft: str | None = None
    head: str | None = None
    head_vocab: int | None = None
    head_vocab_from: str | None = None
    backend: str | None = None
    device: str | None = None
    dtype: str | None = None
    device_map: str | None = None
    cuda_graph: str | None = None
    remeasure: bool = False

    @classmethod
    def of(cls, args: argparse.Namespace) -> ModelFlags:
        return cls(**_present(args, [f.name for f in fields(cls)]))


@dataclass(frozen=True)
class DecodeFlags:
    """The method and every declared parameter's flag (`tui_decode.cli.main.add_decode_args`)."""

    method: str
    raw: bool = False
    values: tuple[tuple[str, Any], ...] = ()  # (parameter name, value) in declaration order

    @classmethod
    def of(cls, args: argparse.Namespace) -> DecodeFlags:
        from decoders.core.params import all_param_specs

        return cls(method=args.method, raw=args.raw,
                   values=tuple(_present(args, list(all_param_specs())).items()))


@dataclass(frozen=True)
class PromptFlags:
    """``--prompt`` / ``--prompt-file`` (one of them at most)."""

    prompt: str | None = None
    prompt_file: str | None = None

    @property
    def given(self) -> bool:
        return self.prompt is not None or bool(self.prompt_file)

    @classmethod
    def of(cls, args: argparse.Namespace) -> PromptFlags:
        return cls(prompt=args.prompt, prompt_file=args.prompt_file)


@dataclass(frozen=True)
class AppArgs:
    """`tui-decode` without a subcommand: the app, its first prompt and parameters."""

    open: str | None
    prompt: PromptFlags
    threads: int | None
    model: ModelFlags
    decode: DecodeFlags
    suffix_memory: str | None = None
    suffix_memory_mb: int | None = None

    @classmethod
    def of(cls, args: argparse.Namespace) -> AppArgs:
        return cls(open=args.open, prompt=PromptFlags.of(args), threads=args.threads, model=ModelFlags.of(args),
                   decode=DecodeFlags.of(args), suffix_memory=args.suffix_memory,
                   suffix_memory_mb=args.suffix_memory_mb)


@dataclass(frozen=True)
class RunArgs:
    """`tui-decode run`: one prompt decoded headless."""

    prompt: PromptFlags
    json: str | None
    repeats: int
    pairing: str
    threads: int | None
    model: ModelFlags
    decode: DecodeFlags
    suffix_memory: str | None = None
    suffix_memory_mb: int | None = None
    # the synthetic draft's flags (`tui_decode.cli.synthetic`); once they ask for it, the method's
    # parameters, held in ``decode`` too
    synthetic_acceptance: tuple[float, ...] | None = None
    synthetic_cost: float | None = None

    @classmethod
    def of(cls, args: argparse.Namespace) -> RunArgs:
        return cls(prompt=PromptFlags.of(args), json=args.json, repeats=args.repeats, pairing=args.pairing,
                   threads=args.threads, model=ModelFlags.of(args), decode=DecodeFlags.of(args),
                   suffix_memory=args.suffix_memory, suffix_memory_mb=args.suffix_memory_mb,
                   **_present(args, ["synthetic_acceptance", "synthetic_cost"]))


#: `tui-decode bench --synthetic-grid`'s token budget when --max-new-tokens is not given: at 32 the
#: budget's last chain and the batch's slowest row took a tenth of batch 4's speedup (issue 39).
GRID_TOKENS = 128


def bench_tokens(given: int | None, grid: str | None) -> int:
    """The bench's token budget: ``given``, else `GRID_TOKENS` for a synthetic grid, else the
    decoding default."""
    if given is not None:
        return given
    if grid is not None:
        return GRID_TOKENS
    from decoders.core.params import DecodeParams

    return DecodeParams().max_new_tokens


@dataclass(frozen=True)
class BenchArgs:
    """`tui-decode bench`: the suite, a sweep, or several backends side by side."""

    prompts: str
    methods: str | None
    variants: str | None
    max_new_tokens: int
    limit: int | None
    repeats: int
    out: str
    sweep: str | None
    bandwidth_mb: int
    record_overhead_every: int
    backends: str | None
    wait: bool
    threads: int | None
    params: tuple[tuple[str, Any], ...]  # every registered method's parameter flag, by name
    model: ModelFlags
    batch: str | None = None
    workload: str = "prompts"
    suffix_memory: str | None = None
    suffix_memory_mb: int | None = None
    synthetic_grid: str | None = None  # the batch bench's synthetic cells (`tui_decode.cli.synthetic`)
    synthetic_cost: float | None = None

    @classmethod
    def of(cls, args: argparse.Namespace) -> BenchArgs:
        from decoders.core.params import method_param_specs

        return cls(prompts=args.prompts, methods=args.methods, variants=args.variants,
                   max_new_tokens=bench_tokens(args.max_new_tokens, args.synthetic_grid), limit=args.limit,
                   repeats=args.repeats, out=args.out,
                   sweep=args.sweep, bandwidth_mb=args.bandwidth_mb, record_overhead_every=args.record_overhead_every,
                   backends=args.backends, wait=args.wait, threads=args.threads,
                   params=tuple(_present(args, list(method_param_specs())).items()), model=ModelFlags.of(args),
                   batch=args.batch, workload=args.workload, suffix_memory=args.suffix_memory,
                   suffix_memory_mb=args.suffix_memory_mb, synthetic_grid=args.synthetic_grid,
                   **_present(args, ["synthetic_cost"]))


@dataclass(frozen=True)
class TrainHeadArgs:
    """`tui-decode train-head`: grow a corpus, train a head on it, measure it."""

    corpus: str
    out: str | None
    grow: float
    grow_batch: int
    epochs: float
    draft_vocab: int
    ttt: int
    max_tokens: int
    curve_points: int
    measure_tokens: int
    lr: float
    fresh: bool
    wait: bool
    threads: int | None
    model: ModelFlags

    @classmethod
    def of(cls, args: argparse.Namespace) -> TrainHeadArgs:
        return cls(corpus=args.corpus, out=args.out, grow=args.grow, grow_batch=args.grow_batch, epochs=args.epochs,
                   draft_vocab=args.draft_vocab, ttt=args.ttt, max_tokens=args.max_tokens,
                   curve_points=args.curve_points, measure_tokens=args.measure_tokens, lr=args.lr,
                   fresh=args.fresh, wait=args.wait, threads=args.threads, model=ModelFlags.of(args))


@dataclass(frozen=True)
class CalibrateArgs:
    """`tui-decode calibrate`: the machine's run-to-run noise, measured and kept."""

    prompt: PromptFlags
    runs: int
    max_new_tokens: int
    threads: int | None
    model: ModelFlags

    @classmethod
    def of(cls, args: argparse.Namespace) -> CalibrateArgs:
        return cls(prompt=PromptFlags.of(args), runs=args.runs, max_new_tokens=args.max_new_tokens,
                   threads=args.threads, model=ModelFlags.of(args))
