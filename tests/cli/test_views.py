"""The typed views of the command line (tui_decode/cli/views.py) hold every flag their parser
defines, so that a flag added to a parser without its view's field fails here, not as a value no
command reads."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from tui_decode.cli.main import build_parser
from tui_decode.cli.views import (
    AppArgs,
    BenchArgs,
    CalibrateArgs,
    DecodeFlags,
    ModelFlags,
    PromptFlags,
    RunArgs,
    TrainHeadArgs,
)


def _held(view: type) -> set[str]:
    """The flag names ``view`` holds: its fields, and its nested views' fields."""
    names: set[str] = set()
    for field in dataclasses.fields(view):
        nested = {"model": ModelFlags, "decode": DecodeFlags, "prompt": PromptFlags}.get(field.name)
        names |= {f.name for f in dataclasses.fields(nested)} if nested is not None else {field.name}
    return names


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _dests(parser: argparse.ArgumentParser) -> set[str]:
    from decoders.core.params import all_param_specs

    declared = set(all_param_specs())  # the declared parameters: held as DecodeFlags.values / BenchArgs.params
    return {a.dest for a in parser._actions
            if a.dest not in ("help", "version", "command") and not isinstance(a, argparse._SubParsersAction)
            and a.dest not in declared}


@pytest.mark.parametrize("command, view", [(None, AppArgs), ("run", RunArgs), ("bench", BenchArgs),
                                           ("train-head", TrainHeadArgs), ("calibrate", CalibrateArgs)])
def test_every_flag_of_a_command_has_its_field_in_the_view(command, view):
    parser = build_parser()
    parser = parser if command is None else _subparsers(parser)[command]
    missing = _dests(parser) - _held(view)
    assert not missing, f"{view.__name__} has no field for {sorted(missing)}: add them (tui_decode/cli/views.py)"


def test_views_read_the_flags_as_given():
    args = build_parser().parse_args(["run", "--prompt", "hi", "--repeats", "3", "--method", "pld", "--threads", "2",
                                      "--max-new-tokens", "7", "--dtype", "float32"])
    view = RunArgs.of(args)
    assert (view.prompt.prompt, view.repeats, view.threads, view.decode.method, view.model.dtype) == \
           ("hi", 3, 2, "pld", "float32")
    assert dict(view.decode.values)["max_new_tokens"] == 7
    train = TrainHeadArgs.of(build_parser().parse_args(["train-head", "--corpus", "c"]))
    assert train.model.self_draft is None and train.model.remeasure is False  # flags its parser lacks: defaults
