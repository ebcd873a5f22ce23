"""`tui-decode bench`: argument parsing; the benchmark itself lives in decoders.bench."""

from __future__ import annotations

import argparse


def add_bench_parser(sub) -> None:
    p = sub.add_parser("bench", help="Spec-Bench-style benchmark, side by side with transformers")
    p.add_argument("--prompts", required=True, metavar="FILE.jsonl")


def cmd_bench(args: argparse.Namespace) -> int:
    from decoders.errors import DecodeError

    raise DecodeError("the benchmark is not built yet")
