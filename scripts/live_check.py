"""Measure where people look: the live app in a real terminal (tmux), run after run.

Starts the app in a tmux session of the given size (pinned to the given cores with taskset),
waits for the model, then presses ctrl+r and ctrl+s for each run and reads the saved runs'
figures: each run's decode speedup with its spread, both ms/token, and at the end how many runs
lie inside their own spread of 1.00x (autoregressive against itself) and inside the first run's
spread. Nothing here is timed by this script: the figures are the app's own.

    python scripts/live_check.py --runs 10 --size 120x40 --cores 0 -- --method ar \\
        --max-new-tokens 48 --threads 1 --prompt-file PROMPT.txt

Needs tmux. The app's runs folder is a temporary one (TUI_DECODE_RUNS_DIR).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout


def screen(session: str) -> str:
    return tmux("capture-pane", "-p", "-t", session)


def wait(session: str, test, what: str, limit: float) -> str:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        text = screen(session)
        if test(text):
            return text
        time.sleep(0.5)
    raise SystemExit(f"live_check: timed out after {limit:.0f} s waiting for {what}; the screen:\n{screen(session)}")


def pooled_figure(text: str) -> tuple[float | None, float | None]:
    """(speedup, spread) from a ratio's words: "1.35x faster than ... (+/- 0.04)", "no measurable
    difference from ... (0.98x +/- 0.03)", "1.20x slower than ... (0.83x +/- 0.02)"."""
    import re

    inner = re.search(r"\(([0-9.]+)x \+/- ([0-9.]+)\)", text)
    if inner:
        return float(inner.group(1)), float(inner.group(2))
    faster = re.search(r"([0-9.]+)x faster[^(]*\(\+/- ([0-9.]+)\)", text)
    if faster:
        return float(faster.group(1)), float(faster.group(2))
    return None, None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--size", default="120x40", help="terminal columns x rows")
    parser.add_argument("--cores", default="0", help="taskset core list for the app (empty: no pinning)")
    parser.add_argument("--app", default=f"{sys.executable} -m tui_decode", help="the command that starts the app")
    parser.add_argument("--cwd", default=".", help="the folder the app starts in")
    parser.add_argument("--load-limit", type=float, default=240.0)
    parser.add_argument("--run-limit", type=float, default=300.0)
    parser.add_argument("--json", type=Path, help="write the runs' figures here")
    parser.add_argument("--repeat", action="store_true",
                        help="press r instead (the app's repeat-and-pool) and read the pooled figure off the screen")
    parser.add_argument("app_args", nargs=argparse.REMAINDER, help="after --: the app's own arguments")
    args = parser.parse_args()
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    app_args = [a for a in args.app_args if a != "--"]
    runs_dir = Path(tempfile.mkdtemp(prefix="live-check-"))
    session = f"live{os.getpid()}"
    command = ((f"taskset -c {args.cores} " if args.cores else "") + args.app + " " + shlex.join(app_args))
    env = f"TUI_DECODE_RUNS_DIR={shlex.quote(str(runs_dir))}"
    tmux("new-session", "-d", "-s", session, "-x", str(cols), "-y", str(rows), "-c", str(Path(args.cwd).resolve()),
         f"env {env} {command}")
    figures: list[dict] = []
    started = time.monotonic()
    ready_s = None
    try:
        wait(session, lambda t: "ready:" in t, "the model to load", args.load_limit)
        ready_s = time.monotonic() - started
        print(f"ready after {ready_s:.1f} s (launch to the ready line, polled every 0.5 s)", flush=True)
        if args.repeat:
            tmux("send-keys", "-t", session, "r")
            text = wait(session, lambda t: "pooled:" in t, "the repeat to finish", args.run_limit * 6)
            flat = " ".join(text.split())
            pooled = flat[flat.index("pooled:"):]
            print(pooled[:160])
            speed, spread = pooled_figure(pooled)
            figures.append({"speedup": speed, "spread": spread, "method_ms": None, "baseline_ms": None})
        for i in range(0 if args.repeat else args.runs):
            before = set(runs_dir.glob("*.json"))
            tmux("send-keys", "-t", session, "C-r")
            time.sleep(1.0)
            wait(session, lambda t: "done in" in t and "measuring" not in t, f"run {i + 1}", args.run_limit)
            tmux("send-keys", "-t", session, "C-s")
            deadline = time.monotonic() + 30
            while not (new := set(runs_dir.glob("*.json")) - before) and time.monotonic() < deadline:
                time.sleep(0.2)
            if not new:
                raise SystemExit(f"live_check: run {i + 1} was not saved; the screen:\n{screen(session)}")
            time.sleep(0.5)  # the file is written atomically: once it is there it is whole
            data = json.loads(max(new, key=lambda p: p.stat().st_mtime).read_text())
            s = data["summary"]
            row = {"speedup": s.get("speedup_decode"), "spread": s.get("speedup_spread"),
                   "method_ms": s.get("decode_ms_per_token"), "baseline_ms": s.get("baseline_decode_ms_per_token"),
                   "label": s.get("label"), "tau": s.get("tau"), "accepted": s.get("accepted"),
                   "drafted": s.get("drafted"), "identical": s.get("identical")}
            figures.append(row)
            drafts = f", {row['accepted']}/{row['drafted']} drafts accepted" if row["drafted"] is not None else ""
            print(f"run {i + 1}: {row['label']}: {row['speedup']}x +/- {row['spread']} ({row['method_ms']} vs "
                  f"{row['baseline_ms']} ms/token, tau {row['tau']}{drafts}, identical {row['identical']})", flush=True)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    speeds = [f["speedup"] for f in figures if f["speedup"] is not None]
    inside = sum(1 for f in figures if f["speedup"] is not None and f["spread"] is not None
                 and abs(f["speedup"] - 1.0) <= f["spread"])
    first = figures[0] if figures else None
    near_first = sum(1 for f in figures if first and f["speedup"] is not None and first["spread"] is not None
                     and abs(f["speedup"] - first["speedup"]) <= first["spread"])
    if speeds:
        print(f"mean {statistics.mean(speeds):.3f}x, sd {statistics.pstdev(speeds):.3f}; "
              f"{inside}/{len(speeds)} inside their own spread of 1.00x; "
              f"{near_first}/{len(speeds)} inside the first run's spread")
    if args.json:
        args.json.write_text(json.dumps({"size": args.size, "cores": args.cores, "app_args": app_args,
                                         "ready_s": ready_s, "runs": figures}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
