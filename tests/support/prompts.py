"""A Spec-Bench prompt by its question id, from the shipped dev set."""

from __future__ import annotations

import json
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "spec_bench_dev.jsonl"


def prompt(question_id: int) -> str:
    for line in BENCH.read_text().splitlines():
        record = json.loads(line)
        if record["question_id"] == question_id:
            return record["turns"][0]
    raise KeyError(question_id)
