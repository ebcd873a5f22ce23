"""A resumable corpus of token ids for training a draft head: the target's own answers.

On disk, one folder: ``tokens.u16`` (every sample's prompt ids then answer ids, 2 bytes a token,
little-endian, appended), ``index.jsonl`` (one line per sample: its key, where its tokens start,
how many are prompt and how many answer) and ``meta.json`` (the model it was generated with, the
vocabulary size). A sample is appended tokens first, index line second, each flushed to disk, so
a run killed at any moment leaves at most a tail of tokens no index line names; opening the
folder cuts that tail off. Every run, on any machine, adds to the same files and skips the keys
already there, and the next training starts from all of it.
"""

from __future__ import annotations

import array
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from decoders.core.errors import DecodeError
from decoders.records.atomic import write_error, write_text

TOKENS = "tokens.u16"
INDEX = "index.jsonl"
META = "meta.json"
TOKEN_BYTES = 2
MAX_ID = 2**16 - 1


@dataclass(frozen=True)
class Sample:
    key: str  # which prompt it answers ("p123", "s45": a summary of sample 45's answer)
    start: int  # token offset in tokens.u16
    n_prompt: int
    n_answer: int

    @property
    def end(self) -> int:
        return self.start + self.n_prompt + self.n_answer


class Corpus:
    """The samples of one corpus folder, opened for reading and appending."""

    def __init__(self, folder: str | os.PathLike, model: str | None = None, vocab_size: int | None = None,
                 append: bool = False):
        """``append``: open for growing (a tail no index line names is cut off); otherwise read only,
        safe while another process appends."""
        self.folder = Path(folder)
        self.append_mode = append
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise write_error(self.folder, err, "the corpus folder") from None
        self.meta = self._meta(model, vocab_size)
        self.samples = self._read_index()
        if append:
            self._cut_tail()

    # -- reading -----------------------------------------------------------------------------
    @property
    def n_tokens(self) -> int:
        return sum(s.n_prompt + s.n_answer for s in self.samples)

    @property
    def n_answer_tokens(self) -> int:
        return sum(s.n_answer for s in self.samples)

    def keys(self) -> set[str]:
        return {s.key for s in self.samples}

    def ids(self, sample: Sample) -> list[int]:
        """The sample's prompt ids followed by its answer ids."""
        with open(self.folder / TOKENS, "rb") as f:
            f.seek(sample.start * TOKEN_BYTES)
            data = f.read((sample.end - sample.start) * TOKEN_BYTES)
        if len(data) != (sample.end - sample.start) * TOKEN_BYTES:
            raise DecodeError(f"The corpus {self.folder} is damaged: sample {sample.key} runs past the end of "
                              f"{TOKENS}; delete the folder's last lines of {INDEX} or the folder.")
        ids = array.array("H", data)
        if sys.byteorder != "little":
            ids.byteswap()
        return ids.tolist()

    # -- appending ---------------------------------------------------------------------------
    def append(self, key: str, prompt_ids: list[int], answer_ids: list[int]) -> Sample:
        if not self.append_mode:
            raise ValueError("this corpus was opened read-only")
        ids = list(prompt_ids) + list(answer_ids)
        if any(not 0 <= i <= MAX_ID for i in ids):
            raise DecodeError(f"token ids must fit in 2 bytes (0..{MAX_ID}) to be stored in {TOKENS}")
        start = self.samples[-1].end if self.samples else 0
        sample = Sample(key, start, len(prompt_ids), len(answer_ids))
        data = array.array("H", ids)
        if sys.byteorder != "little":
            data.byteswap()
        try:
            with open(self.folder / TOKENS, "ab") as f:
                f.write(data.tobytes())
                f.flush()
                os.fsync(f.fileno())
            with open(self.folder / INDEX, "a", encoding="utf-8") as f:
                f.write(json.dumps({"key": key, "start": start, "prompt": sample.n_prompt,
                                    "answer": sample.n_answer}) + "\n")
                f.flush()
                os.fsync(f.fileno())
        except OSError as err:
            self._cut_tail()
            raise write_error(self.folder / TOKENS, err, "the corpus") from None
        self.samples.append(sample)
        return sample

    # -- internals ---------------------------------------------------------------------------
    def _meta(self, model: str | None, vocab_size: int | None) -> dict:
        path = self.folder / META
        if path.exists():
            try:
                meta = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as err:
                raise DecodeError(f"The corpus's {path} cannot be read ({err}); fix or delete it.") from None
            if not isinstance(meta, dict):
                raise DecodeError(f"The corpus's {path} is not a JSON object (the model and vocabulary size); fix "
                                  "or delete it.")
            if model is not None and meta.get("model") != model:
                raise DecodeError(f"The corpus in {self.folder} was generated by {meta.get('model')!r}, not {model!r}; "
                                  "give another --corpus folder.")
            return meta
        if model is None:
            return {}
        meta = {"model": model, "vocab_size": vocab_size, "token_bytes": TOKEN_BYTES}
        write_text(path, json.dumps(meta, indent=1) + "\n", "the corpus's meta.json")
        return meta

    def _read_index(self) -> list[Sample]:
        path = self.folder / INDEX
        samples: list[Sample] = []
        if not path.exists():
            return samples
        with open(path, "rb") as f:
            raw = f.read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            at = raw.count(b"\n", 0, err.start) + 1
            raise DecodeError(f"The corpus's {path} line {at} is not UTF-8 text; delete that line and the lines "
                              "after it.") from None
        lines = text.split("\n")
        complete = lines[:-1]  # a last line without its newline was cut off mid-write
        for n, line in enumerate(complete, 1):
            try:
                row = json.loads(line)
                sample = Sample(str(row["key"]), int(row["start"]), int(row["prompt"]), int(row["answer"]))
            except (ValueError, KeyError, TypeError):
                raise DecodeError(f"The corpus's {path} line {n} is not a sample; delete that line.") from None
            expected = samples[-1].end if samples else 0
            if sample.start != expected:
                raise DecodeError(f"The corpus's {path} line {n} starts at token {sample.start}, "
                                  f"not {expected}; delete it and the lines after it.")
            samples.append(sample)
        if lines[-1] and self.append_mode:
            with open(path, "w", encoding="utf-8") as f:
                f.write("".join(line + "\n" for line in complete))
        return samples

    def _cut_tail(self) -> None:
        """Drop tokens no index line names (a run killed between its two writes)."""
        path = self.folder / TOKENS
        size = path.stat().st_size if path.exists() else 0
        want = (self.samples[-1].end if self.samples else 0) * TOKEN_BYTES
        if size < want:
            raise DecodeError(f"The corpus's {TOKENS} holds {size // TOKEN_BYTES} tokens but {INDEX} names "
                              f"{want // TOKEN_BYTES}; the folder {self.folder} is damaged.")
        if size > want:
            os.truncate(path, want)
