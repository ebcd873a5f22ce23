"""Typing values, seeing the prompt's size and its prefill, and keys that answer at once: typed
parameters checked as one types, the prompt's token count, the prefill as its own step in the
status line, ctrl+q mid-run and the keys' latency while a run decodes, the launch flags."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest
from textual import events

from decoders.core.events import PhaseStarted
from decoders.core.params import DecodeParams
from decoders.engine import Engine
from decoders.records.run import Iteration
from tests.support.app import PROMPT, PacedEngine, make_app, wait_for
from tui_decode.app import TuiDecodeApp
from tui_decode.state.live_run import LiveRun
from tui_decode.state.settings import START_PARAMS, Settings

pytestmark = pytest.mark.anyio
SIZE = (140, 45)


@pytest.fixture
def anyio_backend():
    return "asyncio"


def bare_app(tmp_path, **params) -> TuiDecodeApp:
    return TuiDecodeApp(None, runs_folder=tmp_path, cursor_blink=False,
                        settings=Settings(START_PARAMS.replace(**params)))


def errors(app) -> list[str]:
    return [n.message for n in app._notifications if n.severity == "error"]


# -- typed values ----------------------------------------------------------------------------------
async def test_type_a_seed_in_a_few_keys(tmp_path):
    app = bare_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        main.params_pane.select_key("seed")
        await pilot.press("4", "2", "enter")  # a digit opens the input with it
        assert main.settings.params.seed == 42
        assert app.focused is main.params_pane and not main.value_editor.editing
        await pilot.press("right")  # the arrows keep stepping
        assert main.settings.params.seed == 43


def key(name: str) -> events.Key:
    return events.Key(name, name if len(name) == 1 else None)


async def test_no_digit_is_lost_however_fast_it_is_typed(tmp_path):
    """Keys posted as a terminal delivers them, without waiting for the app between them: "6" then
    "4" 50 ms apart gave "4" (the second digit reopened the input); enter then "123" in one burst
    lost all three (they reached the pane before the input had focus, and the enter's binding was
    resolved against the input once the digit behind it had moved the focus there)."""
    app = bare_app(tmp_path)

    async def settled(pilot, condition) -> None:
        try:
            await wait_for(pilot, condition, timeout=5)
        except AssertionError:
            pass  # the assertion below says what was left
        await pilot.pause(0.1)

    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        main.params_pane.select_key("seed")
        app.post_message(key("6"))
        await asyncio.sleep(0.05)
        app.post_message(key("4"))
        await settled(pilot, lambda: main.value_editor.input.value == "64")
        assert main.value_editor.input.value == "64"
        await pilot.press("enter")
        assert main.settings.params.seed == 64

        for keys, typed in ((["enter", "1", "2", "3"], "123"), (["7", "8", "9"], "789"), (["enter", "5"], "5")):
            for name in keys:
                app.post_message(key(name))
            await settled(pilot, lambda typed=typed: main.value_editor.input.value == typed)
            assert main.value_editor.input.value == typed, (keys, main.value_editor.input.value)
            await pilot.press("enter")
            assert main.settings.params.seed == int(typed) and app.focused is main.params_pane
        for name in ("4", "2", "enter", "enter", "backspace", "7", "enter", "3", "enter"):  # set, then again
            app.post_message(key(name))
        await settled(pilot, lambda: main.settings.params.seed == 3)
        assert main.settings.params.seed == 3 and app.focused is main.params_pane and not main.value_editor.editing


async def test_type_a_temperature_over_the_old_value(tmp_path):
    app = bare_app(tmp_path, mode="sampling")
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        main.params_pane.select_key("temperature")
        await pilot.press("enter")  # the old value, selected: typing replaces it
        assert main.value_editor.input.value == "1"
        await pilot.press("0", "full_stop", "7", "enter")
        assert main.settings.params.temperature == pytest.approx(0.7)
        assert "0.7" in app.export_screenshot()


async def test_an_out_of_range_value_says_the_bound_and_keeps_the_old_one(tmp_path):
    app = bare_app(tmp_path, method="spec")
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        main.params_pane.select_key("gamma")
        await pilot.press("4", "0")
        reason = str(main.value_editor.reason.render())
        assert "32" in reason and "γ draft length" in reason and "--" not in reason  # said while typing
        await pilot.press("enter")
        assert main.settings.params.gamma == 4 and main.value_editor.editing  # kept; the input stays
        await pilot.press("escape")
        assert main.settings.params.gamma == 4 and not main.value_editor.editing
        assert app.focused is main.params_pane
        await pilot.press("x")  # not a number: nothing opens
        await pilot.press("enter", "backspace", "a", "enter")
        assert "whole number" in str(main.value_editor.reason.render()) and main.settings.params.gamma == 4


async def test_enter_on_a_choice_still_steps_it(tmp_path):
    app = bare_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        main.params_pane.select_key("mode")
        await pilot.press("enter")
        assert main.settings.params.mode == "sampling" and not main.value_editor.editing


async def test_errors_in_the_app_use_words_not_flags(tmp_path):
    app = bare_app(tmp_path, method="pld", ngram_min=4, ngram_max=3)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert errors(app) and "lower n-gram min or raise n-gram max" in errors(app)[-1]
        assert "--" not in errors(app)[-1]


# -- the prompt's size and its prefill --------------------------------------------------------------
def test_the_status_line_shows_the_prefill_as_its_own_step():
    now = [0.0]
    live = LiveRun(DecodeParams(method="spec", max_new_tokens=48), "x" * 20000, clock=lambda: now[0])
    live.enter(PhaseStarted("baseline", "Autoregressive baseline", 48, prompt_tokens=4321))
    now[0] = 1.5
    assert live.status == "baseline: prefill 4321 prompt tokens … 1.5 s" and live.fraction is None
    from decoders.core.events import Progress

    now[0] = 2.1
    live.add([Progress("baseline", 1, 48)])
    assert "prefill 2.1 s" in live.status and "1/48 tokens" in live.status and live.fraction == pytest.approx(1 / 48)
    now[0] = 9.0
    live.enter(PhaseStarted("method", "spec", 48, prompt_tokens=4321))
    now[0] = 10.0
    assert live.status == "Speculative: prefill 4321 prompt tokens … 1.0 s" and live.fraction is None
    now[0] = 12.0  # the batch came late; the iteration knows when its token was out
    live.add([Iteration(k=0, pos=0, draft=[], emit=[], t_end_ms=2500.0)])
    assert live.status == "Speculative: 0/48 tokens · prefill 2.5 s" and live.fraction == 0


class SlowPrefillEngine(Engine):
    """A real engine whose phases seem to prefill for a while (no event until the first token)."""

    wait = 0.8

    def stream(self, prompt, params, cancelled=lambda: False, idle=None):
        for event in super().stream(prompt, params, cancelled, idle):
            yield event
            if isinstance(event, PhaseStarted):
                time.sleep(self.wait)


async def test_prompt_token_count_and_prefill_in_the_app(tiny_spec, loader, tiny_family, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, engine_factory=SlowPrefillEngine, method="ar", max_new_tokens=8)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await wait_for(pilot, lambda: main.loaded is not None and main.prompt_pane.token_count is not None)
        expected = len(tiny_family.encode_prompt(PROMPT, True))
        assert main.prompt_pane.token_count == expected
        assert f"{expected} tokens" in str(main.prompt_pane.border_title)
        main.prompt_pane.text = PROMPT + " w30"  # counted again once the typing pauses
        await wait_for(pilot, lambda: main.prompt_pane.token_count not in (None, expected))

        # every state the status line takes: the run holds the UI's loop between hand-overs (the
        # draw gate), so a poll from this coroutine can miss a state that was drawn
        shown: list[tuple[str, object]] = []
        main.status.watch(main.status, "message", lambda value: shown.append(("message", value)))
        main.status.watch(main.status, "fraction", lambda value: shown.append(("fraction", value)))
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: not main.running)
        first = next(i for i, (kind, value) in enumerate(shown)
                     if kind == "message" and "prefill" in str(value) and "tokens …" in str(value))
        message = str(shown[first][1])
        assert f"prefill {main.prompt_pane.token_count} prompt tokens" in message
        assert "0/8 tokens" not in message
        # the bar beside it: no fraction (a prefill has no count to show) until the message changes
        until = next((i for i in range(first + 1, len(shown)) if shown[i][0] == "message"), len(shown))
        fractions = [value for kind, value in shown[:until] if kind == "fraction"]
        assert fractions and fractions[-1] is None, shown[:until + 1]
        assert main.status.state == "done"


# -- quitting and key latency while a run decodes ------------------------------------------------------
class SlowTailEngine(PacedEngine):
    """After the method's run the engine measures the verify-cost curve (about 2 s on a small CPU)."""

    def cost_curve(self, seq, cancelled=lambda: False):
        time.sleep(1.5)
        return super().cost_curve(seq, cancelled)


async def test_ctrl_q_mid_run_leaves_within_half_a_second(tiny_spec, loader, tmp_path):
    """Measured to the end of the worker threads: `App.run` (asyncio.run) waits for them, which
    made ctrl+q wait for the engine to finish its run (about 3 s with the bundled model)."""
    from concurrent.futures import ThreadPoolExecutor

    loop = asyncio.get_running_loop()
    executor = ThreadPoolExecutor()  # what asyncio.run shuts down, waiting, on the way out
    loop.set_default_executor(executor)
    # (a method that verifies drafts: autoregressive runs measure no T(k), so no slow tail)
    app = make_app(tiny_spec, loader, tmp_path, engine_factory=SlowTailEngine, method="pld", max_new_tokens=96)
    try:
        async with app.run_test(size=SIZE) as pilot:
            main = app.main_screen
            await wait_for(pilot, lambda: main.loaded is not None)
            await pilot.press("ctrl+r")
            await wait_for(pilot, lambda: main.table.row_count >= 2)
            started = time.monotonic()
            await pilot.press("ctrl+q")
        executor.shutdown(wait=True)
        elapsed = time.monotonic() - started
    finally:
        loop.set_default_executor(ThreadPoolExecutor())
    print(f"ctrl+q mid-run: left in {1000 * elapsed:.0f} ms")
    assert elapsed < 0.5, f"ctrl+q took {elapsed:.2f} s"
    assert app.return_code == 0 and main.result is None
    assert main.decode_busy()  # the engine winds down in its daemon thread; run_app exits without it


CHILD = """
import sys
from decoders.models.family import FamilySpec
from tui_decode.app import run_app
sys.exit(run_app(FamilySpec(name="tiny", main=sys.argv[1], device="cpu", dtype="float32", label="tiny llama")))
"""


@pytest.mark.slow  # the app in a process and a terminal of its own
@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal")
def test_ctrl_q_with_no_run_going_ends_the_process_at_once(tiny_spec, tmp_path):
    """The whole quit path, in a terminal of its own: from ctrl+q to the process's end. With torch
    and a model loaded the interpreter's teardown after `App.run` took 1.5 s with this tiny model
    (4.6-7.5 s with the bundled one), a blank terminal all along; `run_app` now leaves without it."""
    import fcntl
    import os
    import pty
    import select
    import struct
    import subprocess
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = dict(os.environ, TERM="xterm-256color", HOME=str(tmp_path), HF_HUB_OFFLINE="1",
               PYTHONPATH=str(Path(__file__).parents[2]))
    child = subprocess.Popen([sys.executable, "-c", CHILD, tiny_spec.main], stdin=slave, stdout=slave, stderr=slave,
                             env=env, cwd=tmp_path)
    os.close(slave)
    screen = b""

    def read(seconds: float) -> None:
        nonlocal screen
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if select.select([master], [], [], 0.02)[0]:
                try:
                    screen += os.read(master, 1 << 16)
                except OSError:  # the child closed the terminal
                    return

    try:
        deadline = time.monotonic() + 60
        while b"ready: tiny llama" not in screen:  # the status line once the model is loaded
            assert child.poll() is None and time.monotonic() < deadline, screen[-2000:]
            read(0.1)
        read(0.5)  # settled: nothing running
        started = time.monotonic()
        os.write(master, b"\x11")  # ctrl+q
        while child.poll() is None and time.monotonic() - started < 20:
            read(0.01)
        elapsed = time.monotonic() - started
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        os.close(master)
    print(f"ctrl+q with no run going: the process ended in {1000 * elapsed:.0f} ms")
    assert child.returncode == 0
    assert elapsed < 1.0, f"ctrl+q took {elapsed:.2f} s to end the process"  # 0.3 s measured; 1.7 s before


class BusyEngine(Engine):
    """A real engine that also keeps the interpreter busy for 20 ms per iteration (pure Python
    holds the GIL, the worst case for the UI thread; torch mostly releases it)."""

    def stream(self, prompt, params, cancelled=lambda: False, idle=None):
        for event in super().stream(prompt, params, cancelled, idle):
            if isinstance(event, Iteration):
                end = time.perf_counter() + 0.02
                while time.perf_counter() < end:
                    pass
            yield event


async def test_keys_answer_within_100_ms_while_a_run_decodes(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, engine_factory=BusyEngine, method="ar", max_new_tokens=96)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await wait_for(pilot, lambda: main.loaded is not None)
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: main.live is not None and main.live.phase == "method")
        latencies: list[float] = []
        while main.running and len(latencies) < 40:  # posted as a terminal would; the effect polled
            before = main.params_pane.selected
            started = time.monotonic()
            app.post_message(events.Key("down", None))
            while main.params_pane.selected == before and time.monotonic() - started < 2:
                await asyncio.sleep(0.001)
            latencies.append(time.monotonic() - started)
            await asyncio.sleep(0.03)
        assert len(latencies) >= 3, (main.status.message, main.result)
        latencies.sort()
        median, worst = latencies[len(latencies) // 2], latencies[-1]
        print(f"key latency over {len(latencies)} presses while decoding: median {1000 * median:.0f} ms, "
              f"worst {1000 * worst:.0f} ms")
        # The target is 100 ms for every key (2 ms median, 48 ms worst on a quiet machine); on a
        # shared, loaded CI machine the table and figures catching up (every 0.5 s) can hold a
        # key longer, so the bounds here leave room for the load and catch a UI that blocks.
        assert median < 0.25 and worst < 1.5


# -- launch flags --------------------------------------------------------------------------------------
def test_launch_flags_open_the_app_with_that_prompt_and_those_settings(tmp_path, monkeypatch):
    from tui_decode import app as app_module
    from tui_decode.cli.main import build_parser, cmd_app

    prompt_file = tmp_path / "prompt.txt"
    prompt_file.write_text("Summarise: the cat sat on the mat.")
    seen = {}

    def fake_run(self):
        seen["prompt"], seen["params"] = self.initial_prompt, self.initial_settings.params

    monkeypatch.setattr(app_module.TuiDecodeApp, "run", fake_run)
    args = build_parser().parse_args(["--prompt-file", str(prompt_file), "--method", "pld", "--max-new-tokens", "32"])
    assert cmd_app(args) == 0
    assert seen["prompt"] == "Summarise: the cat sat on the mat."
    assert seen["params"].method == "pld" and seen["params"].max_new_tokens == 32

    assert cmd_app(build_parser().parse_args(["--max-new-tokens", "32"])) == 0
    assert seen["params"].max_new_tokens == 32 and seen["prompt"] == app_module.DEFAULT_PROMPT
    assert seen["params"].method == "spec"
