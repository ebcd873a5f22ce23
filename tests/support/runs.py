"""Saved runs built for the tests: the densest shape the records allow (one-token iterations, as
many as a run may hold), from tests/data/run_spec.json."""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"


def one_token_run(n: int) -> dict:
    """A valid saved run (plain JSON) whose sides are ``n`` one-token iterations each."""
    data = json.loads((DATA / "run_spec.json").read_text())
    for name in ("baseline", "method"):
        run = data["runs"][name]
        run["iters"] = [{"k": k, "pos": k, "draft": [], "emit": [[k % 250, "a", "ar"]]} for k in range(n)]
        run.update(ids=[k % 250 for k in range(n)], kinds=["ar"] * n, tok_iter=list(range(n)), tokens=["a"] * n,
                   text="a" * n)
    data["schema"] = 2
    data["summary"]["tokens"] = n
    data["params"].update(method="ar", max_new_tokens=min(n, 131072))
    return data


def write_run(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data, separators=(",", ":")))
    return path
