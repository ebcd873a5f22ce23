"""The app's first run when nobody chose a method (issue 36): speculative decoding, unless the
draft the family chose on this machine is not predicted to pay here; then prompt lookup, and the
ready line says why."""

from __future__ import annotations

import dataclasses

import pytest

from tests.support.app import PROMPT, wait_for
from tui_decode.app import TuiDecodeApp
from tui_decode.state.settings import START_PARAMS, Settings
from tui_decode.state.start_method import START_PAYS, predicted_draft, start_method

pytestmark = pytest.mark.anyio


def choice(predicted: float | None, chosen: str = "head") -> dict:
    return {"chosen": chosen, "step_ms": 30.0, "curve": [1.0, 1.1],
            "candidates": [{"kind": "int4", "source": "int4 self-draft", "predicted": 0.98},
                           {"kind": "head", "source": "trained head", "predicted": predicted}],
            "sentence": f"trained head: predicted {predicted}x here"}


def test_the_chosen_draft_s_prediction_is_read_from_its_record():
    assert predicted_draft(choice(1.08)) == ("trained head", 1.08)
    assert predicted_draft(choice(1.08, chosen="int4")) == ("int4 self-draft", 0.98)
    assert predicted_draft(choice(None)) is None
    assert predicted_draft(None) is None and predicted_draft({}) is None


@pytest.mark.parametrize(("predicted", "method"), [(1.08, "pld"), (START_PAYS - 0.001, "pld"), (START_PAYS, None),
                                                   (1.4, None)])
def test_a_draft_that_does_not_pay_here_opens_on_prompt_lookup(predicted, method):
    picked = start_method(START_PARAMS, START_PARAMS, choice(predicted))
    assert (picked[0] if picked else None) == method
    if picked:
        assert picked[1] == f"the chosen model draft, trained head, is predicted {predicted:.2f}x here; m: speculative"


def test_a_method_or_parameter_someone_chose_is_kept():
    assert start_method(START_PARAMS.replace(gamma=6), START_PARAMS, choice(1.0)) is None
    assert start_method(START_PARAMS.replace(method="jacobi"), START_PARAMS, choice(1.0)) is None
    assert start_method(START_PARAMS, START_PARAMS, None) is None  # nothing was measured: the default


@pytest.mark.parametrize(("predicted", "runs"), [(1.05, "Prompt lookup"), (1.3, "Speculative")])
async def test_the_ready_line_names_the_first_run_s_method_and_why(tiny_spec, tiny_family, tmp_path, predicted, runs):
    family = dataclasses.replace(tiny_family, draft_choice=choice(predicted))
    app = TuiDecodeApp(tiny_spec, load_family=lambda spec, progress: family, runs_folder=tmp_path / "runs",
                       prompt=PROMPT, settings=Settings(START_PARAMS), cursor_blink=False)
    async with app.run_test(size=(160, 45)) as pilot:
        main = app.main_screen
        await wait_for(pilot, lambda: main.loaded is not None and "ready" in main.status.message)
        assert main.settings.params.method == ("pld" if runs == "Prompt lookup" else "spec")
        assert f"ctrl+r runs {runs}" in main.status.message
        said = "the chosen model draft, trained head, is predicted 1.05x here" in main.status.message
        assert said == (runs == "Prompt lookup")
