"""`tui-decode families`: each family, what drafts for it by default, and what else may draft.

Every family may draft by early exit (``--self-draft-layer L``) or with an int4 copy of its main
model (``--self-draft int4``), which is built when the family loads. Where the main model's
config can be read without loading it (the bundled model, a local model folder), the int4 kind is
checked against the kernel's shapes here, and a family it cannot serve says why.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from rich.table import Table

#: The bundled SmolLM2-135M: the int4 draft is built from its GGUF's own Q4_1 blocks.
BUNDLED = "bundled"


def int4_reason(spec) -> str | None:
    """Why the int4 kind cannot draft for ``spec``'s main model, as far as its config shows
    without loading it; None when it can or when only loading will tell."""
    if spec.device_map:
        return "a device map spreads the main model"
    config_file = Path(str(spec.main)).expanduser() / "config.json"
    if spec.main == BUNDLED or not config_file.is_file():
        return None  # the bundled model takes it; a .gguf file or a hub id is checked when it loads
    try:
        config = SimpleNamespace(**json.loads(config_file.read_text(encoding="utf-8")))
        from decoders.backends.llama_support import SUPPORTED_TYPES
        from decoders.backends.quantized import config_matrix_shapes, shapes_reason

        if getattr(config, "model_type", None) not in SUPPORTED_TYPES:
            return f"model_type {getattr(config, 'model_type', None)!r} is not Llama-shaped"
        return shapes_reason(config_matrix_shapes(config))
    except (OSError, ValueError, TypeError, AttributeError, ZeroDivisionError):
        return None  # an unreadable config: loading will say what is wrong


def draft_text(spec) -> str:
    """What drafts for ``spec`` when nothing else is asked for: its draft's view (`decoders.models.drafts`)."""
    from decoders.models.drafts import TrainedHead

    if spec.draft is None:
        return "-"
    if isinstance(spec.draft, TrainedHead):
        return f"trained head {spec.draft.folder or '(shipped)'}"
    return spec.draft.view()


def backend_text(spec) -> str:
    """What runs ``spec``'s models, and whether llama.cpp could (a GGUF main model)."""
    if spec.backend == "llamacpp":
        return "llama.cpp"
    main = str(spec.main)
    return "torch (or --backend llamacpp)" if main == BUNDLED or main.lower().endswith(".gguf") else "torch"


def other_drafts(spec) -> str:
    """The other drafts ``spec`` may use than its declared draft, each with its flag."""
    from decoders.models.drafts import EarlyExit, Int4, TrainedHead, head_of

    if spec.backend == "llamacpp":
        return "a GGUF helper (--helper FILE.gguf); early exit, int4 and heads need --backend torch"
    options = []
    if not isinstance(spec.draft, EarlyExit):
        options.append("early exit (--self-draft-layer L)")
    if not isinstance(spec.draft, Int4):
        reason = int4_reason(spec)
        options.append("int4 (--self-draft int4)" if reason is None else f"not int4: {reason}")
    if not isinstance(spec.draft, TrainedHead):
        from decoders.models.backend_choice import head_folder

        named = head_of(spec.draft)  # "fastest" names the head it may choose
        shipped = head_folder(named.folder if named is not None else None, str(spec.main), missing_ok=True)
        options.append("trained head (--self-draft head)" if shipped else "a trained head (--head FOLDER)")
    return "; ".join(options)


def families_table(families: dict, config_file: Path) -> Table:
    table = Table(title=f"model families (config: {config_file})",
                  caption="int4: a 4-bit copy of the main model drafts for it, built when the family loads "
                          '(self_draft = "int4" in the config file makes it the default)', caption_justify="left")
    for col in ("name", "main", "draft", "may also draft with", "backend", "device", "dtype"):
        table.add_column(col, overflow="fold")  # a narrow terminal breaks a long id, never cuts it
    for name, spec in families.items():
        table.add_row(name, spec.main, draft_text(spec), other_drafts(spec), backend_text(spec), spec.device,
                      spec.dtype)
    return table
