"""`tui-decode train-head`'s flags: each one it lists says what it does, and it lists none it
ignores (the draft and backend flags of a decoding run: the head it trains is the draft, and it
trains on the torch model's hidden states)."""

from __future__ import annotations

import argparse

import pytest

from tests.cli.conftest import error_line
from tui_decode.cli.main import build_parser

#: Flags a decoding run takes that train-head has no use for: it drops every draft the flags name
#: before loading, and llama.cpp exposes no hidden states to train on.
DECODING_ONLY = ("--helper", "--self-draft-layer", "--self-draft", "--head", "--head-vocab", "--head-vocab-from",
                 "--backend", "--method", "--gamma")


def train_head_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["train-head"]


def test_every_train_head_flag_has_a_help_text():
    unexplained = [a.option_strings[0] for a in train_head_parser()._actions
                   if a.option_strings and (not a.help or a.help == argparse.SUPPRESS)]
    assert unexplained == []


def test_train_head_lists_no_decoding_only_flag():
    listed = {flag for a in train_head_parser()._actions for flag in a.option_strings}
    assert listed.isdisjoint(DECODING_ONLY), sorted(listed & set(DECODING_ONLY))
    assert {"--family", "--main", "--device", "--dtype", "--threads"} <= listed  # what it loads, kept


@pytest.mark.parametrize("flag", ["--helper", "--self-draft-layer", "--head", "--backend"])
def test_a_decoding_only_flag_given_to_train_head_is_refused_in_one_line(capsys, tmp_path, flag):
    err = error_line(capsys, ["train-head", "--corpus", str(tmp_path / "c"), flag, "x"])
    assert f"unrecognized arguments: {flag} x (see `tui-decode train-head --help`)" in err
