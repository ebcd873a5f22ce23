"""Published draft-head formats, read by their tensor names and ``config.json`` fields.

* EAGLE-1/2 (SafeAILab/EAGLE ``cnets.py``): ``fc.weight`` ``[hidden, 2 hidden]`` (and ``fc.bias``
  when the config says ``bias``), ``layers.0.self_attn.{q,k,v,o}_proj`` (q/k/v biases for Qwen
  targets), ``layers.0.mlp.{gate,up,down}_proj``, ``layers.0.post_attention_layernorm``; the first
  layer has no input norm (a ``layers.0.input_layernorm`` in the file is unused). The LM head is
  the target's own.
* EAGLE-3: ``fc.weight`` ``[hidden, 3 target_hidden]``, ``midlayer.self_attn.*`` (q/k/v over twice
  the hidden size), ``midlayer.mlp.*``, ``midlayer.{input_layernorm,hidden_norm,
  post_attention_layernorm}``, ``norm``, ``lm_head`` ``[draft_vocab, hidden]``, ``d2t`` (draft
  row -> target id offset) and ``t2d``; the auxiliary layers from ``eagle_config.
  eagle_aux_hidden_state_layer_ids`` or the default ``(2, L // 2, L - 3)`` of an L-layer target.
* Medusa (FasterDecoding/Medusa): ``medusa_head.{i}.{j}.linear.{weight,bias}`` (ResBlocks) and
  ``medusa_head.{i}.{n_layers}.weight`` (one LM head per head), ``medusa_num_heads`` and
  ``medusa_num_layers`` in the config. The published heads hold only the heads' own state dict,
  ``medusa_lm_head.safetensors`` or ``medusa_lm_head.pt`` with unprefixed names (``0.0.linear.weight``,
  ``0.1.weight``), beside a config with ``base_model_name_or_path``; both layouts load.

A head is a folder, or a Hugging Face hub id (``org/name``): the copy in the hub cache is used when
there is one (so it works offline once downloaded), else the config and weights are downloaded.

Every mismatch with the target (hidden size, vocabulary, layer count) is one DecodeError naming
the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from decoders.core.errors import DecodeError
from decoders.records.stored import HeadConfigFile

FORMATS = ("eagle1", "eagle3", "medusa")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "medusa_lm_head.safetensors", "medusa_lm_head.pt")
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")
HUB_FILES = ["config.json", *WEIGHT_FILES]
MAX_HEAD_BYTES = 8 * 2**30  # a head is one layer; a larger file is not a head
WEIGHTS_FILE = "model.safetensors"  # the name a head trained here is written under
WEIGHTS_ID_KEY = "tui_decode_id"  # its header's metadata: the id its config.json names


@dataclass(frozen=True)
class TargetShape:
    """What a head must fit: the target's sizes."""

    hidden: int
    vocab: int
    n_layers: int
    heads: int
    kv_heads: int
    rope_theta: float
    eps: float


def looks_like_hub_id(source: str) -> bool:
    return bool(HUB_ID.match(source)) and not Path(source).expanduser().exists() and ".." not in source


def resolve_head(source: str | Path, cache_dir: str | None = None) -> Path:
    """The local folder of a head given as a folder or a hub id (``org/name``)."""
    path = Path(source).expanduser()
    if path.is_dir():
        return path
    text = str(source)
    if not looks_like_hub_id(text):
        raise DecodeError(f"Head {text[:200]!r} is not a folder; give a folder with config.json and "
                          "model.safetensors (or pytorch_model.bin), or a hub id such as org/name.")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:  # pragma: no cover - transformers brings it
        raise DecodeError(f"Head {text!r} looks like a hub id, but huggingface_hub is not installed; "
                          "download the head and give its folder.") from None
    try:  # the cached copy first: no network needed once a head was downloaded
        return Path(snapshot_download(text, allow_patterns=HUB_FILES, cache_dir=cache_dir, local_files_only=True))
    except Exception:  # noqa: BLE001 - not in the cache (or a damaged cache entry): download it
        pass
    try:
        return Path(snapshot_download(text, allow_patterns=HUB_FILES, cache_dir=cache_dir))
    except Exception as err:  # noqa: BLE001 - the hub client raises many kinds (network, auth, not found)
        why = type(err).__name__
        if any(word in why for word in ("Offline", "Connect", "Timeout", "LocalEntry")):
            detail = "the Hugging Face hub cannot be reached from here and the head is not in the hub cache"
        elif "NotFound" in why or "Gated" in why or "Unauthorized" in why:
            detail = "the hub has no such head, or it needs a login (huggingface-cli login)"
        else:
            detail = f"{why}"
        raise DecodeError(f"Cannot get head {text!r} from the Hugging Face hub ({detail}); download it where "
                          "the hub can be reached (huggingface-cli download) or give a local folder.") from None


def read_head_files(folder: str | Path) -> tuple[HeadConfigFile, dict]:
    """``(config, tensors)`` of a head folder or hub id; DecodeError naming what is missing or damaged."""
    path = resolve_head(folder)
    config_path = path / "config.json"
    try:
        config = HeadConfigFile.read(config_path)
    except FileNotFoundError:
        raise DecodeError(f"Head folder {path} has no config.json; a head needs its config beside "
                          "its weights: download the head again, or train one with `tui-decode train-head`.") from None
    weights = next((path / name for name in WEIGHT_FILES if (path / name).is_file()), None)
    if weights is None:
        raise DecodeError(f"Head folder {path} has no {' or '.join(WEIGHT_FILES)}.")
    if weights.stat().st_size > MAX_HEAD_BYTES:
        raise DecodeError(f"Head weights {weights} hold {weights.stat().st_size / 2**30:.1f} GiB; a draft head is "
                          f"one layer (at most {MAX_HEAD_BYTES // 2**30} GiB here).")
    tensors = published_names(_read_tensors(weights))
    want = config.tui_decode_weights_id
    if isinstance(want, str):  # a head trained here: its config and weights were written as one
        have = weights_id(weights)
        if have != want:
            raise DecodeError(f"Head folder {path} holds the weights of one save and the config.json of another "
                              f"(the config names {want[:40]}, {weights.name} "
                              f"{'is ' + have[:40] if have else 'names none'}): its writing was cut off between "
                              "them; run the same `tui-decode train-head --out` again to write it whole (it starts "
                              "from its checkpoint).")
    return config, tensors


def weights_id(weights: Path) -> str | None:
    """The id in a safetensors file's header metadata (`WEIGHTS_ID_KEY`), or None."""
    if weights.suffix != ".safetensors":
        return None
    try:
        from safetensors import safe_open

        with safe_open(str(weights), "pt") as handle:
            value = (handle.metadata() or {}).get(WEIGHTS_ID_KEY)
    except Exception:  # noqa: BLE001 - read in full just before: a damaged header was said there
        return None
    return value if isinstance(value, str) else None


def published_names(tensors: dict) -> dict:
    """Medusa's published files hold the heads' ModuleList alone (``0.0.linear.weight``): name them
    as the full model does (``medusa_head.0.0.linear.weight``)."""
    if tensors and all(re.match(r"^\d+\.\d+\.", name) for name in tensors):
        return {f"medusa_head.{name}": t for name, t in tensors.items()}
    return tensors


def _read_tensors(weights: Path) -> dict:
    try:
        if weights.suffix == ".safetensors":
            from safetensors.torch import load_file

            return dict(load_file(str(weights)))
        import torch

        state = torch.load(str(weights), map_location="cpu", weights_only=True)
        return dict(state)
    except Exception as err:  # safetensors and pickle raise many kinds for a cut or damaged file
        raise DecodeError(f"Head weights {weights} cannot be read ({type(err).__name__}); the file is truncated "
                          "or damaged: download or train it again.") from None


def detect_format(tensors: dict) -> str:
    names = set(tensors)
    if any(n.startswith("medusa_head.") for n in names):
        return "medusa"
    if any(n.startswith("midlayer.") for n in names):
        return "eagle3"
    if "fc.weight" in names and any(n.startswith("layers.0.") for n in names):
        return "eagle1"
    shown = ", ".join(sorted(names)[:4])
    raise DecodeError(f"Unknown head format: its tensors ({shown}, ...) are neither EAGLE-1/2 (fc, layers.0.*), "
                      "EAGLE-3 (fc, midlayer.*) nor Medusa (medusa_head.*).")


def need(tensors: dict, name: str, shape: tuple[int, ...] | None = None, what: str = "the head"):
    """Tensor ``name``, checked for presence and shape."""
    if name not in tensors:
        raise DecodeError(f"{what} lacks tensor {name!r}; the file is not a complete head of its format.")
    t = tensors[name]
    if shape is not None and tuple(t.shape) != shape:
        raise DecodeError(f"{what}'s tensor {name!r} has shape {tuple(t.shape)}, expected {shape} for this target.")
    return t
