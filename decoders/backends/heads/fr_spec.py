"""FR-Spec (Zhao et al. 2025): an EAGLE-1/2 head that shares the target's LM head drafts over its
N most frequent tokens only.

A head's step is one decoder layer plus an LM head, and with the target's whole LM head the LM
head is most of it (the bundled model: 49,152 rows of 576; measured 16 ms a step against 5.6 ms
over 8,192 rows on a 2-core CPU). FR-Spec keeps the rows of the tokens a model writes most and
drafts over those; the target still verifies over its whole vocabulary, so greedy output is
unchanged and sampling stays exact (q is 0 outside the subset: `HeadDraft` fills those logits
with -inf). EAGLE-3 heads carry their own reduced LM head (``d2t``) and are left as they are.

The ranking comes from a file of token ids, most frequent first (FR-Spec's released
``freq_*.pt`` tensors, or a JSON list), or from a `tui-decode train-head` corpus of the same
model (the counts of all its tokens, prompts and answers).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from decoders.core.errors import DecodeError
from decoders.records.stored import CorpusMeta

if TYPE_CHECKING:
    import torch

MAX_RANKING_BYTES = 64 << 20  # a ranking of a 1M-token vocabulary as int64 is 8 MB
MAX_CORPUS_BYTES = 512 << 20  # 256M tokens, counted in memory (int64: 2 GB)


def locate(source: str) -> Path:
    """The ranking file or corpus folder ``source`` names, checked before any model loads (it
    needs no torch): it exists, is a regular file within its bound or a folder holding a corpus's
    tokens; DecodeError in one line otherwise. The ids are checked against the model by `ranked_ids`."""
    path = Path(source).expanduser()
    what = f"--head-vocab-from {source[:200]}"
    try:
        if path.is_dir():
            tokens = path / "tokens.u16"
            size = tokens.stat().st_size if tokens.is_file() else 0
            if size < 2:
                raise DecodeError(f"{what} holds no tokens to count (no tokens.u16); grow it first "
                                  "(tui-decode train-head --grow), or give a ranking file.")
            if size > MAX_CORPUS_BYTES:
                raise DecodeError(f"{what}'s tokens.u16 is {size >> 20} MB; counting reads it "
                                  f"whole, {MAX_CORPUS_BYTES >> 20} MB ({MAX_CORPUS_BYTES >> 21}M tokens) at most: "
                                  "rank a part of it, or give a ranking file.")
            return path
        if not path.exists():
            raise DecodeError(f"{what} does not exist; give a file of token ids (most frequent first) or a "
                              "train-head corpus folder of this model.")
        if not path.is_file():
            raise DecodeError(f"{what} is not a regular file (a device or a pipe); give a file of token ids (most "
                              "frequent first) or a train-head corpus folder of this model.")
        size = path.stat().st_size
    except OSError as err:  # a name too long, a folder it may not read
        raise DecodeError(f"{what} cannot be read ({(err.strerror or type(err).__name__)[:120]}); give a ranking "
                          "file or a corpus folder you can read.") from None
    if size == 0:
        raise DecodeError(f"{what} is empty; give FR-Spec's freq_*.pt or a JSON list of ids, most frequent first.")
    if size > MAX_RANKING_BYTES:
        raise DecodeError(f"{what} is {size >> 20} MB, more than a ranking of token ids needs "
                          f"({MAX_RANKING_BYTES >> 20} MB at most); give the ranking file itself.")
    return path


def ranked_ids(source: str, vocab: int) -> torch.Tensor:
    """Token ids of a ``vocab``-token model, most frequent first, from ``source`` (a ranking file or
    a corpus folder); DecodeError in one line for anything else."""
    import torch

    path = locate(source)
    what = f"--head-vocab-from {source[:200]}"
    if path.is_dir():
        return _from_corpus(path, vocab, what)
    try:
        if path.suffix == ".json":
            ids = torch.tensor(json.loads(path.read_text(encoding="utf-8")), dtype=torch.long)
        else:
            ids = torch.load(str(path), map_location="cpu", weights_only=True)
            ids = torch.as_tensor(ids).long()
    except (OSError, ValueError, TypeError, RuntimeError, UnicodeDecodeError) as err:
        why = str(err).splitlines()[0][:120] if str(err) else type(err).__name__
        raise DecodeError(f"{what} is not a list of token ids ({why}); give FR-Spec's freq_*.pt or a JSON list "
                          "of ids, most frequent first.") from None
    ids = ids.reshape(-1)
    if ids.numel() == 0 or int(ids.min()) < 0 or int(ids.max()) >= vocab:
        raise DecodeError(f"{what} holds ids outside 0..{vocab - 1}, this model's vocabulary; it ranks another "
                          "model's tokens.")
    if int(torch.unique(ids).numel()) != int(ids.numel()):
        raise DecodeError(f"{what} names some token twice; a ranking names each token once.")
    return ids


def _from_corpus(path: Path, vocab: int, what: str) -> torch.Tensor:
    """Rank by the counts of every token in a train-head corpus (its ``tokens.u16``: 2-byte ids)."""
    import torch

    meta_path = path / "meta.json"  # `locate` saw a tokens.u16 of 2 bytes or more, within its bound
    try:
        meta = CorpusMeta.read(meta_path) if meta_path.is_file() else CorpusMeta()
        data = (path / "tokens.u16").read_bytes()
    except DecodeError as err:  # the metadata, damaged: its own line names the file, the field and the fix
        raise DecodeError(f"{what}: {err}") from None
    except OSError as err:
        raise DecodeError(f"{what}: the corpus cannot be read ({str(err)[:160]}); fix or delete it.") from None
    corpus_vocab = meta.vocab_size
    if corpus_vocab is not None and corpus_vocab != vocab:
        raise DecodeError(f"{what} is a corpus of a {corpus_vocab}-token vocabulary, and this model has {vocab}; "
                          "give a corpus of this model.")
    ids = torch.frombuffer(bytearray(data[: len(data) // 2 * 2]), dtype=torch.int16).long() & 0xFFFF
    if int(ids.max()) >= vocab:
        raise DecodeError(f"{what} holds ids beyond this model's vocabulary of {vocab}; it is another model's corpus.")
    counts = torch.bincount(ids, minlength=vocab)
    return counts.argsort(descending=True, stable=True)  # tokens never seen follow, in id order


def restrict(head, ids: torch.Tensor, size: int) -> None:
    """Make the EAGLE-1/2 ``head`` (sharing the target's LM head) draft over the first ``size``
    of ``ids``: its LM head becomes those rows (a copy), ``draft_ids`` their target ids."""
    import torch

    c = head.config
    if c.kind == "eagle3":
        raise DecodeError("--head-vocab applies to heads that share the target's LM head (EAGLE-1/2); this "
                          f"EAGLE-3 head has its own {c.draft_vocab}-token vocabulary (d2t). Leave --head-vocab out.")
    if not 1 <= size <= c.vocab:
        raise DecodeError(f"--head-vocab {size} is outside 1..{c.vocab}, this model's vocabulary.")
    if size > ids.numel():
        raise DecodeError(f"--head-vocab {size} asks for more tokens than the ranking holds ({ids.numel()}); "
                          f"give at most {ids.numel()}, or a larger ranking.")
    keep = ids[:size].sort().values.to(head.draft_ids.device)
    with torch.no_grad():
        rows = head.lm_head.weight.detach()[keep].clone()
        head.lm_head = torch.nn.Linear(c.hidden, size, bias=False).to(rows.device)
        head.lm_head.weight = torch.nn.Parameter(rows, requires_grad=False)
        head.draft_ids = keep
    head.config = type(c)(**{**c.__dict__, "draft_vocab": size})
