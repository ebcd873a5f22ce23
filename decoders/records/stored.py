"""The newer on-disk formats, declared as records like the run file: a head's ``config.json``
(`HeadConfigFile`), a training report ``training.json`` (`TrainingReport`), a train-head corpus's
``meta.json`` and ``index.jsonl`` lines (`CorpusMeta`, `CorpusRow`) and the GGUF cache's marker
(`GGUFMarker`).

Each is read and checked in one call (`StoredRecord.loads` / `StoredRecord.read`: msgspec decodes
the JSON straight into the declared type) and written in one (`StoredRecord.dumps` /
`StoredRecord.write`, atomic). A damaged or foreign file is one `DecodeError` line naming the
file, the field and how to fix it. Fields this version does not declare are left alone (a head
published elsewhere carries many), and a field that is absent reads as `msgspec.UNSET` where its
default comes from elsewhere (the target model, for a head).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from decoders.core.errors import DecodeError
from decoders.records.codec import Record, json_text, one_line

__all__ = [
    "UNSET", "CorpusMeta", "CorpusRow", "CurvePoint", "EagleConfig", "FileSum", "GGUFMarker", "HeadConfigFile",
    "StoredRecord", "TrainSettings", "TrainingReport", "UnsetType", "or_default",
]

S = TypeVar("S", bound="StoredRecord")
V = TypeVar("V")
D = TypeVar("D")

_WHOLE = "\x00"  # `one_line`'s name for the file as a whole, replaced by the file's own
MAX_STORED_BYTES = 16 << 20  # none of these files is larger; a larger one is not one of them


def or_default(value: V | UnsetType, default: D) -> V | D:
    """``value``, or ``default`` where the file left the field out."""
    return default if value is UNSET else value


class StoredRecord(Record):  # every field written, but those left UNSET (never read from the file)
    """A declared file: ``WHAT`` names it in errors ("the head's config"), ``FIX`` says what to do
    about a damaged one."""

    WHAT: ClassVar[str] = "the file"
    FIX: ClassVar[str] = "fix or delete it"

    def dumps(self) -> str:
        """The record as the JSON text the file holds (never NaN: see `json_text`)."""
        return json_text(self.to_json(), indent=1) + "\n"

    def write(self, path: str | Path) -> Path:
        """Write the file atomically; `decoders.records.atomic.WriteError` when it cannot be."""
        from decoders.records.atomic import write_text

        write_text(Path(path), self.dumps(), self.WHAT)
        return Path(path)

    @classmethod
    def loads(cls: type[S], raw: str | bytes, where: str | Path = "") -> S:
        """``raw`` (a file's text) decoded and checked as this record in one pass; DecodeError in one
        line naming ``where``, the field and the fix otherwise."""
        where = f"{cls.WHAT} {where}".strip() if where else cls.WHAT
        try:
            return msgspec.json.decode(raw, type=cls)
        except msgspec.ValidationError as exc:
            try:  # the plain values, for naming a mapping's key in the message ("files.model.safetensors")
                data = msgspec.json.decode(raw)
            except (msgspec.DecodeError, RecursionError):
                data = None
            problem = one_line(exc, data, root=_WHOLE)
            if problem.startswith(f"{_WHOLE} must be an object"):  # "... is not a JSON object; fix ..."
                problem = "is not a JSON object"
            elif problem.startswith(f"{_WHOLE} "):  # "... has no corpus; fix ..."
                problem = problem[len(_WHOLE) + 1:]
            else:  # "...: hidden_size must be an integer, got str; fix ..."
                problem = f": {problem}".replace(f": {_WHOLE}: ", ": ")
            raise DecodeError(f"{_capital(where)}{'' if problem.startswith(':') else ' '}{problem}; "
                              f"{cls.FIX}.") from None
        except (msgspec.DecodeError, RecursionError) as exc:
            raise DecodeError(f"{_capital(where)} cannot be read (it is not JSON: {str(exc)[:80]}); "
                              f"{cls.FIX}.") from None

    @classmethod
    def read(cls: type[S], path: str | Path) -> S:
        """The file at ``path``, read (at most `MAX_STORED_BYTES`) and checked in one call;
        FileNotFoundError when there is none, DecodeError for anything else."""
        path = Path(path)
        try:
            with path.open("rb") as handle:
                raw = handle.read(MAX_STORED_BYTES + 1)
        except FileNotFoundError:
            raise
        except OSError as err:
            raise DecodeError(f"{_capital(cls.WHAT)} {path} cannot be read ({err.strerror or err}); "
                              f"{cls.FIX}.") from None
        if len(raw) > MAX_STORED_BYTES:
            raise DecodeError(f"{_capital(cls.WHAT)} {path} is larger than {MAX_STORED_BYTES >> 20} MiB, which no "
                              f"such file is; {cls.FIX}.")
        return cls.loads(raw, path)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


# -- a trained head's report ---------------------------------------------------------------------
class CurvePoint(Record, omit_defaults=True):
    """One held-out evaluation during training (``step`` "end": after the last step)."""

    step: int | Literal["end"]
    tokens_seen: int
    accept_per_depth: list[float]
    mean_accepted: float


class TrainSettings(Record, kw_only=True):
    """What ``tui-decode train-head`` was asked to do (`decoders.training.session.train_head`), as
    its training report (and each checkpoint) holds it under ``settings``, in that key order."""

    corpus: str  # the corpus folder (`tui-decode corpus`)
    out: str  # the head's folder
    main: str = "bundled"  # the target model
    draft_vocab: int = 8192  # the head's draft vocabulary (the target's most chosen tokens)
    ttt: int = 3  # training-time test: the chain length trained
    epochs: float = 4.0
    lr: float = 1e-3
    batch_tokens: int = 1024
    holdout: int = 10  # every holdout-th sample is held out for evaluation
    max_tokens: int = 0  # 0: the whole corpus
    seed: int = 0
    curve_points: int = 6  # held-out evaluations during training (the learning curve)


class TrainingReport(StoredRecord):
    """``training.json`` beside a trained head (and its config's ``tui_decode_training``)."""

    WHAT: ClassVar[str] = "the training report"
    FIX: ClassVar[str] = "train the head again (`tui-decode train-head`) or delete the file"
    FILE: ClassVar[str] = "training.json"

    corpus: str
    corpus_samples: int
    train_tokens: int
    heldout_positions: int
    accept_per_depth: list[float]
    mean_accepted: float
    train_seconds: float
    extract_tokens_per_s: float
    learning_curve: list[CurvePoint] = msgspec.field(default_factory=list)
    answer_tokens_heldout_only: bool = True
    settings: TrainSettings | UnsetType = UNSET  # train-head's settings, as given
    this_machine: dict[str, Any] | UnsetType = UNSET  # `--measure-tokens`: the head's run on this machine
    head_id: str | UnsetType = UNSET  # the id of the weights it reports on (their config.json names it too)


# -- a head's config.json ------------------------------------------------------------------------
class EagleConfig(Record, omit_defaults=True):
    eagle_aux_hidden_state_layer_ids: list[int] | None | UnsetType = UNSET  # the target layers EAGLE-3 reads


class HeadConfigFile(StoredRecord):
    """A draft head's ``config.json``: the fields read here, from heads trained here and published
    ones (EAGLE-1/2, EAGLE-3, Medusa); a field left out takes the target model's value."""

    WHAT: ClassVar[str] = "the head's config"
    FIX: ClassVar[str] = "download the head again, or train one with `tui-decode train-head`"

    architectures: list[str] | UnsetType = UNSET
    tui_decode_format: Literal["eagle1", "eagle3", "medusa"] | UnsetType = UNSET
    hidden_size: int | UnsetType = UNSET
    num_attention_heads: int | UnsetType = UNSET
    num_key_value_heads: int | UnsetType = UNSET
    head_dim: int | UnsetType = UNSET
    intermediate_size: int | UnsetType = UNSET
    vocab_size: int | UnsetType = UNSET
    draft_vocab_size: int | UnsetType = UNSET
    rms_norm_eps: float | UnsetType = UNSET
    rope_theta: float | UnsetType = UNSET
    num_hidden_layers: int | UnsetType = UNSET
    bias: bool | UnsetType = UNSET  # EAGLE-1/2: fc has a bias
    eagle_config: EagleConfig | UnsetType = UNSET
    medusa_num_heads: int | UnsetType = UNSET
    medusa_num_layers: int | UnsetType = UNSET
    tui_decode_training: TrainingReport | UnsetType = UNSET  # a head trained here: its report
    tui_decode_weights_id: str | UnsetType = UNSET  # a head trained here: the id in its weights' header


# -- a train-head corpus -------------------------------------------------------------------------
class CorpusMeta(StoredRecord):
    """A corpus's ``meta.json``: which model generated it and the ids' size."""

    WHAT: ClassVar[str] = "the corpus's metadata"
    FIX: ClassVar[str] = "fix or delete it"

    model: str | None = None
    vocab_size: int | None = None
    token_bytes: int = 2


class CorpusRow(StoredRecord):
    """One line of a corpus's ``index.jsonl``: a sample's key, its first token in ``tokens.u16``,
    its prompt's and its answer's token counts."""

    WHAT: ClassVar[str] = "the corpus's index"
    FIX: ClassVar[str] = "delete that line"

    key: str
    start: Annotated[int, msgspec.Meta(ge=0)]
    prompt: Annotated[int, msgspec.Meta(ge=0)]
    answer: Annotated[int, msgspec.Meta(ge=0)]

    def line(self) -> str:
        """The index line, as ``json.dumps`` writes it (the corpora written so far look so)."""
        return json_text(self.to_json()) + "\n"


# -- the GGUF cache's marker ---------------------------------------------------------------------
class FileSum(Record, omit_defaults=True):
    """One file of a converted copy as it was written: its size, modification time and SHA-256
    (and, for a large file, the digest of a sample of its blocks)."""

    size: int
    mtime_ns: int
    sha256: str
    sample: str | UnsetType = UNSET


class GGUFMarker(StoredRecord):
    """``tui-decode-gguf.json``, written last into a converted GGUF copy: the source file's
    identity and each file of the copy (an older marker without ``files`` is not trusted)."""

    WHAT: ClassVar[str] = "the cache marker"
    FIX: ClassVar[str] = "the copy is converted afresh"

    source: str = ""
    size: int = 0
    mtime_ns: int = 0
    converted_at: str = ""
    conversion_seconds: float = 0.0
    files: dict[str, FileSum] | None = None
