"""The command line's argument parser: argparse, but every usage error is one line saying what was
wrong and where the help is, with a long value cut short."""

from __future__ import annotations

import argparse
import re

from decoders.core.errors import MOST_VALUE, DecodeError, shown


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line that says what was wrong and where help is."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # `--temperature -inf` is a value, as `-1.5` is, not an unknown flag ("expected one argument").
        self._negative_number_matcher = re.compile(r"^-(\d+\.?\d*(e[+-]?\d+)?|\.\d+|inf|infinity|nan)$", re.I)

    def error(self, message: str):  # type: ignore[override]
        raise DecodeError(f"{message} (see `{self.prog} --help`)")

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        """As argparse's, but arguments no parser took point at the help of the command given."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = getattr(parsed, "command", None)
            where = f"{self.prog} {command}" if command else self.prog
            listed = " ".join(extra if len(extra) <= MOST_VALUE else shown(extra) for extra in extras[:8])
            more = f" and {len(extras) - 8} more" if len(extras) > 8 else ""
            raise DecodeError(f"unrecognized arguments: {listed}{more} (see `{where} --help`)")
        return parsed
