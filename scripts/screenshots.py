"""Regenerate screenshots/<method>.svg: the app after a real run of each method on the bundled
SmolLM2-135M, at a fixed terminal size, with the iteration that emitted the most tokens selected.

    python scripts/screenshots.py                 # all four methods
    python scripts/screenshots.py --methods pld   # just one

The figures are measured on the machine that runs the script: run it on an idle machine, or
give --threads 1 on a small shared one (torch's threads spread over every core slow down by
orders of magnitude when another process takes one of them; the app's model line shows the count).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

METHODS = ("ar", "spec", "pld", "jacobi")
SIZE = (140, 45)


def busiest_iteration(result) -> int:
    """The iteration that emitted the most tokens (the first of equals): the detail worth showing."""
    iters = result.method.iters
    return max(range(len(iters)), key=lambda k: (len(iters[k].emit), -k)) if iters else 0


async def capture(methods: list[str], out: Path, max_new_tokens: int, timeout: float) -> None:
    from decoders.models.families import BUILTIN_FAMILIES, DEFAULT_FAMILY
    from tui_decode.app import TuiDecodeApp
    from tui_decode.state.settings import START_PARAMS, Settings

    spec = replace(BUILTIN_FAMILIES[DEFAULT_FAMILY], device="cpu", dtype="float32")
    settings = Settings(START_PARAMS.replace(max_new_tokens=max_new_tokens))
    with tempfile.TemporaryDirectory() as runs:
        app = TuiDecodeApp(spec, settings=settings, runs_folder=Path(runs), cursor_blink=False)
        async with app.run_test(size=SIZE) as pilot:
            deadline = time.monotonic() + timeout
            while app.main_screen.loaded is None:
                if not app.main_screen.loading_family or time.monotonic() > deadline:
                    raise SystemExit(f"the bundled model did not load: {app.main_screen.status.message}")
                await pilot.pause(0.1)
            for method in methods:
                app.main_screen.set_method(method)
                previous = app.main_screen.result
                await pilot.press("ctrl+r")
                while app.main_screen.result is previous or app.main_screen.running:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"{method} did not finish in time: {app.main_screen.status.message}")
                    await pilot.pause(0.1)
                app.main_screen.table.select_iteration(busiest_iteration(app.main_screen.result))
                app.main_screen.params_pane.focus()
                await pilot.pause(0.3)
                path = app.save_screenshot(filename=f"{method}.svg", path=str(out))
                s = app.main_screen.result.summary
                print(f"{Path(path).relative_to(ROOT) if Path(path).is_relative_to(ROOT) else path}: "
                      f"{s.tokens} tokens, {s.speedup_wall}x")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds for the load and all runs")
    parser.add_argument("--threads", type=int, help="torch threads for the runs (default: torch's own choice)")
    args = parser.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    asyncio.run(capture(args.methods, args.out, args.max_new_tokens, args.timeout))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
