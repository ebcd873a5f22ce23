"""A calibration file that cannot be read (garbage, cut short) is said when the app's model is
ready, as `tui-decode run` says it, not passed over as if there were none (issue 40's sweep, a01);
the file is left as it is (a calibration replaces it)."""

from __future__ import annotations

import pytest

from tests.support.app import SIZE, make_app, wait_for

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.parametrize("content", [b"\x00\xffgarbage", b'{"abc": {"key": "abc", "mach'])
async def test_a_damaged_calibration_file_is_said_when_the_model_is_ready(tiny_spec, loader, tmp_path,
                                                                          calibration_file, content):
    calibration_file.write_bytes(content)
    app = make_app(tiny_spec, loader, tmp_path)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        main = app.main_screen
        await wait_for(pilot, lambda: main.loaded is not None)
        await pilot.pause()
        said = [n.message for n in app._notifications] + [main.status.message]
        line = f"{calibration_file} is not a calibration file (damaged?); calibrate again to replace it"
        assert any(line in text for text in said), said
        assert "spreads are step jitter only: n calibrates" not in main.status.message
    assert calibration_file.read_bytes() == content


async def test_no_calibration_file_is_no_notification(tiny_spec, loader, tmp_path, calibration_file):
    app = make_app(tiny_spec, loader, tmp_path)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        main = app.main_screen
        await wait_for(pilot, lambda: main.loaded is not None)
        await pilot.pause()
        assert not app._notifications, [n.message for n in app._notifications]
        assert "spreads are step jitter only: n calibrates" in main.status.message
    assert not calibration_file.exists()
