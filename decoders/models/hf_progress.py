"""Transformers' own progress bars kept off the terminal the app draws on: silenced, or routed
into a load's progress report (`GGUFProgress`: a GGUF's reading, step by step)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from decoders.core.events import LoadProgress


@contextlib.contextmanager
def quiet_progress_bars() -> Iterator[None]:
    """Keep transformers' tqdm bars off the terminal (the app draws there), then restore them."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


class GGUFProgress:
    """Transformers' reading of a GGUF file reported step by step, so a first load's bar moves.

    A GGUF load sat at one fraction for 49 s (3.5 minutes on a loaded machine): transformers parses
    the file's metadata (for the tokenizer, then for the config, then again with the tensor index),
    builds the model, maps every module's tensor names, and only then dequantises the tensors, the
    one step its own progress bar covered. Inside `reading`, the functions of its GGUF module that
    do this are wrapped (module attributes, looked up at each call): each step is reported as it
    starts, the name mapping per module and the dequantising per tensor, each at a fraction above
    the last. ``phase`` ("tokenizer", then "model") says which of the two reads is under way.
    A step that reports nothing for `HEARTBEAT` seconds (parsing the metadata: 9 s each on this
    machine under load) is reported again with the seconds it has taken so far.
    """

    HEARTBEAT = 1.0

    #: (phase, step) -> (fraction of the conversion, what is done). The tensors go from TENSORS on.
    STEPS = {
        ("tokenizer", "metadata"): (0.02, "parsing its metadata"),
        ("tokenizer", "metadata read"): (0.10, "building it from the GGUF's vocabulary"),
        ("model", "metadata"): (0.22, "parsing its config"),
        ("model", "metadata read"): (0.28, "building the model"),
        ("model", "tensor index"): (0.34, "parsing its tensor index"),
    }
    NAMES = (0.40, 0.52)  # mapping tensor names, one step per module
    TENSORS = (0.52, 0.85)  # dequantising, one step per tensor

    def __init__(self, report: LoadProgress, name: str) -> None:
        self.report = report
        self.name = name
        self.phase = "tokenizer"
        self.last = 0.0
        self._modules = [0, 0]  # mapped, total
        self._lock = threading.Lock()  # the heartbeat reports from a thread of its own
        self._text = ""
        self._since = self._said = time.monotonic()

    def say(self, text: str, fraction: float) -> None:
        with self._lock:
            now = time.monotonic()
            if text != self._text:
                self._text, self._since = text, now
            self._said = now
            self.last = max(self.last, fraction)
            self.report(text, self.last)

    def step(self, step: str) -> None:
        known = self.STEPS.get((self.phase, step))
        if known is not None:
            what = "Reading the tokenizer of" if self.phase == "tokenizer" else "Dequantising"
            first = "" if self.phase == "tokenizer" else " (first load only)"
            self.say(f"{what} {self.name}{first}: {known[1]}", known[0])

    def _beat(self, stop: threading.Event) -> None:
        while not stop.wait(self.HEARTBEAT / 4):
            with self._lock:
                now = time.monotonic()
                if self._text and now - self._said >= self.HEARTBEAT:
                    self._said = now
                    self.report(f"{self._text} … {now - self._since:.0f} s", self.last)

    @contextlib.contextmanager
    def reading(self) -> Iterator[GGUFProgress]:
        try:
            import transformers.modeling_gguf_pytorch_utils as gguf_utils
        except ImportError:
            yield self
            return
        wrapped = {name: getattr(gguf_utils, name, None)
                   for name in ("load_gguf_checkpoint", "get_gguf_hf_weights_map", "tqdm")}
        if wrapped["load_gguf_checkpoint"] is not None:
            gguf_utils.load_gguf_checkpoint = self._checkpoint(wrapped["load_gguf_checkpoint"])
        if wrapped["get_gguf_hf_weights_map"] is not None:
            gguf_utils.get_gguf_hf_weights_map = self._names(wrapped["get_gguf_hf_weights_map"])
        if wrapped["tqdm"] is not None:
            gguf_utils.tqdm = self._tensors
        stop = threading.Event()
        beat = threading.Thread(target=self._beat, args=(stop,), name="gguf-progress", daemon=True)
        beat.start()
        try:
            yield self
        finally:
            stop.set()
            beat.join()
            for name, original in wrapped.items():
                if original is not None:
                    setattr(gguf_utils, name, original)

    def _checkpoint(self, original):
        def checkpoint(path, return_tensors=False, *args, **kwargs):
            self.step("tensor index" if return_tensors else "metadata")
            out = original(path, return_tensors, *args, **kwargs)
            if not return_tensors:
                self.step("metadata read")
            return out

        return checkpoint

    def _names(self, original):
        def names(model, *args, qual_name: str = "", **kwargs):
            if not qual_name:  # the top call: the model itself, then each module below it
                self._modules = [0, sum(1 for _ in model.modules())]
            done, total = self._modules
            self._modules[0] = done + 1
            low, high = self.NAMES
            self.say(f"Dequantising {self.name} (first load only): mapping tensor names ({done}/{total} modules)",
                     low + (high - low) * done / max(total, 1))
            return original(model, *args, qual_name=qual_name, **kwargs)

        return names

    def _tensors(self, iterable, desc=None, **_kwargs):
        items = list(iterable)
        total = max(len(items), 1)
        low, high = self.TENSORS
        for index, item in enumerate(items):
            self.say(f"Dequantising tensors ({index}/{total})", low + (high - low) * index / total)
            yield item
