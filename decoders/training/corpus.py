"""A resumable corpus of token ids for training a draft head: the target's own answers.

On disk, one folder: ``tokens.u16`` (every sample's prompt ids then answer ids, 2 bytes a token,
little-endian, appended), ``index.jsonl`` (one line per sample: its key, where its tokens start,
how many are prompt and how many answer) and ``meta.json`` (the model it was generated with, the
vocabulary size). A sample is appended tokens first, index line second, each flushed to disk, so
a run killed at any moment leaves at most a tail of tokens no index line names; opening the
folder to append cuts that tail off. Every run, on any machine, adds to the same files and skips
the keys already there, and the next training starts from all of it.

One process appends at a time: opening the folder to append takes its lock
(`decoders.records.folder.FolderLock`) until `Corpus.close`, so a second ``--grow`` on the same
corpus is told who is growing it (or waits, with ``wait``) instead of writing its samples at the
same offsets and cutting the first one's unindexed tokens. Reading needs no lock.
"""

from __future__ import annotations

import array
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from decoders.core.errors import DecodeError
from decoders.records.atomic import write_error
from decoders.records.folder import FolderLock, kill_point, sweep_temps
from decoders.records.stored import CorpusMeta, CorpusRow

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


def corpus_lock(folder: str | os.PathLike, wait: bool = False, on_wait=None) -> FolderLock:
    """The corpus folder's lock (not yet taken), held by whoever appends to it."""
    return FolderLock(folder, "the corpus", wait=wait, on_wait=on_wait)


class Corpus:
    """The samples of one corpus folder, opened for reading and appending."""

    def __init__(self, folder: str | os.PathLike, model: str | None = None, vocab_size: int | None = None,
                 append: bool = False, wait: bool = False, on_wait=None):
        """``append``: open for growing, holding the folder's lock until `close` (a tail no index
        line names is cut off; `FolderBusy` when another process grows it, unless ``wait``);
        otherwise read only, safe while another process appends."""
        self.folder = Path(folder)
        self.append_mode = append
        self.lock: FolderLock | None = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise write_error(self.folder, err, "the corpus folder") from None
        if append:
            self.lock = corpus_lock(self.folder, wait, on_wait).acquire()
        try:
            self.meta = self._meta(model, vocab_size)
            self.samples = self._read_index()
            if append:
                sweep_temps(self.folder, locked=True)
                self._cut_tail()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop appending: the folder's lock goes (reading goes on)."""
        if self.lock is not None:
            self.lock.release()
            self.lock = None
        self.append_mode = False

    def __enter__(self) -> Corpus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
            kill_point("corpus:index")  # a test stops here: tokens written, no index line names them
            with open(self.folder / INDEX, "a", encoding="utf-8") as f:
                f.write(CorpusRow(key=key, start=start, prompt=sample.n_prompt, answer=sample.n_answer).line())
                f.flush()
                os.fsync(f.fileno())
        except OSError as err:
            self._cut_tail()
            raise write_error(self.folder / TOKENS, err, "the corpus") from None
        self.samples.append(sample)
        return sample

    # -- internals ---------------------------------------------------------------------------
    def _meta(self, model: str | None, vocab_size: int | None) -> CorpusMeta:
        path = self.folder / META
        if path.exists():
            meta = CorpusMeta.read(path)
            if model is not None and meta.model != model:
                raise DecodeError(f"The corpus in {self.folder} was generated by {meta.model!r}, not {model!r}; "
                                  "give another --corpus folder.")
            return meta
        if model is None:
            return CorpusMeta()
        meta = CorpusMeta(model=model, vocab_size=vocab_size, token_bytes=TOKEN_BYTES)
        meta.write(path)
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
                row = CorpusRow.loads(line)
            except DecodeError as err:  # "The corpus's index: start must be ...; delete that line."
                why = str(err).removeprefix(_capital(CorpusRow.WHAT)).removesuffix(f"; {CorpusRow.FIX}.")
                why = why.removeprefix(": ").removeprefix(" ")
                raise DecodeError(f"The corpus's {path} line {n} is not a sample ({why}); delete that line.") from None
            sample = Sample(row.key, row.start, row.prompt, row.answer)
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


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
