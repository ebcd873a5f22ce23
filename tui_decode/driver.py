"""The terminal driver: Textual's, with key bursts read as pastes.

A terminal or multiplexer without bracketed paste delivers a paste key by key. Textual then posts
one `Key` event per character, far faster than the app handles them: a 1 MB paste was still being
inserted after 3 minutes, the app's queue growing by 20 MB/s to 5.6 GB, a SIGTERM stuck behind it,
and every one-letter key in the text (s, g, h ...) acted on where the prompt did not have the focus
(issue 40). A person typing sends one key per read of the terminal; text keys that arrive together
in one read are a paste. `Bursts` turns such a run of text keys (printable characters, enter, tab)
into one `Paste` event, joined with the runs of the reads that follow it at once, and keeps at most
`MAX_BURST` characters of it (the rest is dropped; the prompt editor cuts the paste at its bound and
says so once). A single key, and every other event (escape sequences, the mouse, a bracketed
paste), passes as it came.
"""

from __future__ import annotations

import os
import selectors
from codecs import getincrementaldecoder
from typing import Any, Callable, Iterable

from textual import events
from textual.drivers.linux_driver import LinuxDriver
from textual.message import Message

from decoders.records.bounds import MAX_PROMPT

#: The most characters of one burst kept: one more than a prompt may hold, so that the editor
#: knows to cut it and say so; more would only grow the memory (a 1 GB paste).
MAX_BURST = MAX_PROMPT + 1
#: Seconds a burst waits for the next read before it is posted: a paste's reads follow each other
#: within microseconds; a person's keys are tens of milliseconds apart and never form a burst.
BURST_GAP = 0.02

_TEXT_KEYS = {"enter": "\n", "tab": "\t"}


def key_text(event: Message) -> str | None:
    """The text a key stands for in a paste (its character; enter a newline, tab a tab), or None."""
    if not isinstance(event, events.Key):
        return None
    if event.key in _TEXT_KEYS:
        return _TEXT_KEYS[event.key]
    if event.character == "\n":  # ctrl+j: a line feed pasted as is
        return "\n"
    return event.character if event.is_printable else None


class Bursts:
    """Coalesces the text keys of each read into pastes; ``post`` receives what goes on."""

    def __init__(self, post: Callable[[Message], None], limit: int = MAX_BURST) -> None:
        self.post = post
        self.limit = limit
        self.parts: list[str] = []  # the burst so far, waiting for the next read
        self.size = 0
        self.dropped = 0  # characters of the burst past ``limit``

    @property
    def pending(self) -> bool:
        return bool(self.parts)

    def read(self, parsed: Iterable[Message]) -> None:
        """The events parsed from one read of the terminal."""
        run: list[events.Key] = []
        for event in parsed:
            if key_text(event) is not None:
                assert isinstance(event, events.Key)
                run.append(event)
                continue
            self._run(run)
            run = []
            self.flush()
            self.post(event)
        self._run(run)

    def _run(self, run: list[events.Key]) -> None:
        """A run of text keys from one read: one key alone is typed (it goes on as it came); two or
        more, or any that follow a burst at once, are (more of) a paste."""
        if len(run) == 1 and not self.parts:
            self.post(run[0])
            return
        for key in run:
            self._add(key_text(key) or "")

    def text(self, text: str) -> None:
        """Plain text read whole (`plain_text`): more of the burst, without a key event per character."""
        self._add(text)

    def _add(self, text: str) -> None:
        room = self.limit - self.size
        if len(text) > room:
            self.dropped += len(text) - max(room, 0)
            text = text[:max(room, 0)]
        if text:
            self.parts.append(text)
            self.size += len(text)

    def flush(self) -> None:
        """Post the burst so far as one paste (nothing when there is none)."""
        if not self.parts:
            return
        text = "".join(self.parts)
        self.parts, self.size, self.dropped = [], 0, 0
        self.post(events.Paste(text))


_TEXT_CONTROLS = str.maketrans("", "", "\r\n\t")


def plain_text(data: str) -> bool:
    """Whether ``data`` holds only characters that are text keys (no escape sequence, no control
    key but enter, tab and line feed): then it needs no parsing, one key event per character."""
    return "\x1b" not in data and data.translate(_TEXT_CONTROLS).isprintable()


def parser_idle(parser: Any) -> bool:
    """Whether Textual's parser (8.2.8, pinned) waits for a key of its own: in no escape sequence
    (its reads inside one have a timeout) and no bracketed paste. False when it cannot tell."""
    try:
        if parser._awaiting.timeout is not None:
            return False
        frame = parser._gen.gi_frame
        return frame is not None and frame.f_locals.get("bracketed_paste") is False
    except AttributeError:
        return False


def read_into(bursts: Bursts, parser: Any, data: str) -> None:
    """One read of the terminal: plain text that is (more of) a burst goes in whole, as a paste
    of a megabyte must (parsed, each character costs tens of microseconds); the rest is parsed."""
    if (bursts.pending or len(data) > 1) and plain_text(data) and parser_idle(parser):
        bursts.text(data.replace("\r", "\n"))
    else:
        bursts.read(parser.feed(data))


class BurstDriver(LinuxDriver):
    """`LinuxDriver` whose input thread reads key bursts as pastes (`Bursts`). Its loop is Textual
    8.2.8's (pinned), with the bursts added, and end of input no longer read again in a busy loop."""

    def run_input_thread(self) -> None:
        from textual._xterm_parser import XTermParser

        selector = selectors.SelectSelector()
        selector.register(self.fileno, selectors.EVENT_READ)
        fileno = self.fileno
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode
        bursts = Bursts(self.process_message)
        ended = False
        try:
            while not self.exit_event.is_set():
                if ended:  # end of input: nothing more comes, and reading it again would spin
                    self.exit_event.wait(0.1)
                    continue
                ready = selector.select(BURST_GAP if bursts.pending else 0.1)
                if not ready:
                    bursts.flush()
                for _key, mask in ready:
                    if mask & selectors.EVENT_READ:
                        data = decode(os.read(fileno, 1024 * 4))
                        if not data:
                            ended = True
                            break
                        read_into(bursts, parser, data)
                bursts.read(parser.tick())
            bursts.flush()
        finally:
            selector.close()
            try:
                for _event in parser.feed(""):
                    pass
            except Exception:  # noqa: BLE001 - as Textual's: the parser's end is of no interest now
                pass
