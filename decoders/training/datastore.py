"""`tui-decode datastore build`: fill a suffix-decoding memory from a corpus, before any decoding.

A corpus is one of: a train-head corpus folder (`decoders.training.corpus`: the target's own
answers, the best memory there is, since a small model repeats its own phrasing); a JSONL file,
one document per line (an object with a "text", "response", "answer", "output" or "completion"
string); or a UTF-8 text file, documents separated by blank lines. Each document joins the memory
as one response (never forgotten for a prompt: a corpus must not hold the prompts measured later).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from decoders.core.errors import DecodeError
from decoders.methods.shared.suffix_memory import MAX_RESPONSE_TOKENS, SuffixMemory

if TYPE_CHECKING:
    from decoders.models.family import Family

MAX_CORPUS_BYTES = 256 << 20
MAX_DOCUMENTS = 1_000_000
TEXT_KEYS = ("text", "response", "answer", "output", "completion")
FIX = "give a train-head corpus folder, a JSONL file of {\"text\": ...} lines, or a UTF-8 text file"


@dataclass
class BuildReport:
    documents: int
    tokens: int  # tokens added
    responses: int  # responses the memory holds now (after its bounds)
    nodes: int
    evicted: int
    seconds: float
    file_bytes: int
    cut: int = 0  # documents longer than a response's bound, cut to it (MAX_RESPONSE_TOKENS)


def documents(path: str | Path, family: Family, texts: list[str] | None = None) -> list[list[int]]:
    """The corpus's documents as token ids (raw text, no chat template, no special tokens added);
    ``texts``: the file's documents as `read_texts` read them (None: read here, or a corpus folder)."""
    path = Path(path)
    if texts is None:
        texts = read_texts(path)
    if texts is None:  # a corpus folder
        return _corpus_folder(path, family)
    tok = family.tokenizer
    return [list(tok(t, add_special_tokens=False)["input_ids"]) for t in texts]


def read_texts(path: str | Path) -> list[str] | None:
    """A corpus file's documents as text, checked without the model (so that a corpus that is not
    text, empty, or a JSONL without text fields fails in one line before any model loads); None
    for a corpus folder (its marks checked here, its token ids read once the model has loaded)."""
    path = Path(path)
    if path.is_dir():
        from decoders.training.corpus import INDEX, META

        if not (path / META).exists() or not (path / INDEX).exists():
            raise DecodeError(f"the folder {path} is not a train-head corpus (no {META} and {INDEX}); {FIX}")
        return None
    from decoders.records.inputs import read_text

    text = read_text(path, "the corpus", MAX_CORPUS_BYTES, FIX)
    if path.suffix == ".jsonl":
        texts = _jsonl(text, path)
    else:
        texts = [doc.strip() for doc in text.split("\n\n") if doc.strip()]
    if not texts:
        raise DecodeError(f"the corpus {path} holds no text; {FIX}")
    if len(texts) > MAX_DOCUMENTS:
        raise DecodeError(f"the corpus {path} holds {len(texts)} documents, more than {MAX_DOCUMENTS}; split it")
    return texts


def _jsonl(text: str, path: Path) -> list[str]:
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as err:
            raise DecodeError(f"line {n} of the corpus {path} is not JSON ({err}); {FIX}") from None
        value = next((row[k] for k in TEXT_KEYS if isinstance(row, dict) and isinstance(row.get(k), str)), None)
        if value is None:
            raise DecodeError(f"line {n} of the corpus {path} has none of the text fields {', '.join(TEXT_KEYS)}; "
                              f"{FIX}")
        out.append(value)
    return out


def _corpus_folder(path: Path, family: Family) -> list[list[int]]:
    from decoders.training.corpus import INDEX, META, Corpus

    if not (path / META).exists() or not (path / INDEX).exists():
        raise DecodeError(f"the folder {path} is not a train-head corpus (no {META} and {INDEX}); {FIX}")
    corpus = Corpus(path)
    vocab = corpus.meta.vocab_size
    if vocab is not None and vocab != family.vocab_size:
        raise DecodeError(f"the corpus {path} was built with a {vocab}-token vocabulary, not this model's "
                          f"{family.vocab_size}; give a corpus of this model")
    return [corpus.ids(s)[s.n_prompt:] for s in corpus.samples]


def build(memory: SuffixMemory, docs: list[list[int]], out: str | Path) -> BuildReport:
    """Add ``docs`` to ``memory`` and write it to ``out`` (atomically)."""
    t0 = time.perf_counter()
    before = memory.evicted
    tokens = cut = 0
    for doc in docs:
        memory.add("", doc)
        tokens += min(len(doc), MAX_RESPONSE_TOKENS)  # what joined: a longer document is cut to the bound
        cut += len(doc) > MAX_RESPONSE_TOKENS
    memory.save(out)
    seconds = time.perf_counter() - t0
    return BuildReport(len(docs), tokens, len(memory), memory.nodes, memory.evicted - before, seconds,
                       Path(out).stat().st_size, cut)
