"""The target's features of corpus samples, kept between `train-head` runs.

Extracting features is the slow part of training on a CPU (one teacher-forced target forward per
sample: 200-250 tokens/s on one core, about 15 minutes for the bundled corpus), and it gives the
same result every time for the same model, layers and tokens. So what one run extracted is kept in
the user cache folder (``$TUI_DECODE_CACHE_DIR/gguf/features/``, beside the converted GGUF copies),
one file per (model, layers, corpus) written atomically: at the end of extraction, every
``SAVE_SECONDS`` during it, and when ctrl+c or SIGTERM stops it. The next run, a resumed one, or one
with other epochs or another ``--max-tokens`` reads it and extracts only the samples it lacks. An
entry is used only when its token ids are the sample's own, so a corpus that changed under the same
name costs a new extraction, never a wrong feature.
"""

from __future__ import annotations

import hashlib
import io
import os
import time
from pathlib import Path

from decoders.core.errors import DecodeError
from decoders.records.atomic import write_bytes

SAVE_SECONDS = 300.0
FOLDER = "features"


def features_root() -> Path:
    from decoders.models.gguf_cache import cache_root

    return cache_root() / FOLDER


def fingerprint(model) -> str:
    """A digest of the model's weights (shapes and the first values of each tensor): another model
    under the same name, or the same one retrained, gets another file."""
    import torch

    digest = hashlib.sha256()
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            digest.update(f"{name}{tuple(tensor.shape)}{tensor.dtype}".encode())
            head = tensor.detach().reshape(-1)[:256].float().cpu().contiguous()
            digest.update(head.numpy().tobytes())
    return digest.hexdigest()[:16]


def cache_file(model, model_source: str, aux: tuple[int, ...], corpus_folder: str | os.PathLike) -> Path:
    key = f"{model_source}|{fingerprint(model)}|{list(aux)}|{Path(corpus_folder).resolve()}"
    return features_root() / (hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32] + ".pt")


def entry_key(sample) -> str:
    return f"{sample.key}:{sample.start}:{sample.n_prompt}:{sample.n_answer}"


class FeatureCache:
    """Entries ``{entry_key: (ids, feats, labels)}`` of one file; `save` writes them atomically."""

    def __init__(self, path: Path, report=None):
        self.path = path
        self.entries: dict[str, tuple] = {}
        self.dirty = False
        self.last_save = time.monotonic()
        self.report = report or (lambda line: None)
        self._load()

    def _load(self) -> None:
        import torch

        from decoders.records.folder import sweep_temps

        sweep_temps(self.path.parent)  # a save killed mid-write (its process gone) left its temporary file
        if not self.path.is_file():
            return
        try:
            state = torch.load(str(self.path), map_location="cpu", weights_only=True)
            entries = state["entries"]
            if not isinstance(entries, dict):
                raise TypeError("entries")
        except Exception as err:  # noqa: BLE001 - a cut or damaged file: extract again, say so
            self.report(f"the feature cache {self.path} cannot be read ({type(err).__name__}); extracting again")
            return
        self.entries = entries

    def get(self, sample, ids):
        """The cached ``(feats, labels)`` of ``sample`` if its token ids are ``ids``, else None."""
        import torch

        entry = self.entries.get(entry_key(sample))
        if entry is None or not torch.equal(entry[0], ids):
            return None
        return entry[1], entry[2]

    def put(self, sample, ids, feats, labels) -> None:
        self.entries[entry_key(sample)] = (ids, feats, labels)
        self.dirty = True
        if time.monotonic() - self.last_save > SAVE_SECONDS:
            self.save()

    def save(self) -> None:
        """Write the entries (atomically); a full disk or an unwritable cache is said and skipped:
        the features are still in memory and training goes on."""
        import torch

        if not self.dirty:
            return
        buffer = io.BytesIO()
        torch.save({"entries": self.entries}, buffer)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_bytes(self.path, buffer.getvalue(), "the feature cache")
        except (OSError, DecodeError) as err:
            self.report(f"the features were not kept for the next run: {err}")
        self.dirty = False
        self.last_save = time.monotonic()
