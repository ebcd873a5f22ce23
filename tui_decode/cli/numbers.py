"""Numbers typed on the command line that argparse checks itself: a bounded integer type."""

from __future__ import annotations

import argparse

MAX_REPEATS = 20  # `run --repeats`: each repeat is a method run and its baseline


def bounded_int(flag: str, low: int, high: int):
    """An argparse type: an integer in low..high, else one line saying so."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            message = f"{flag} takes a whole number in {low}..{high}, got {text[:40]!r}"
            raise argparse.ArgumentTypeError(message) from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{flag} must be in {low}..{high}, got {value}")
        return value

    return parse
