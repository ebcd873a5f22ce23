"""What ran a run or a bench: the ``family`` field of a saved run (`decoders.records.files.RunFile`)
and of every report.json (bench, sweep, batch), declared once.

`decoders.models.family.Family.describe` writes it; the bench adds the backend's class, the bytes
of weights one forward reads and the layer count (`decoders.bench.machine.family_info`), and a run
the torch threads it ran on. Every field may be left out (UNSET, and then not written), so that
files written before a field existed (or with ``"family": {}``) read back as they were written;
a field of the wrong type is refused in one line naming it. Keys this version does not know are
ignored on reading.
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET, UnsetType

from decoders.records.codec import Record


class FamilyInfo(Record, kw_only=True):
    """The models, draft, device and dtype that ran a saved run or a bench report; a field left
    out (UNSET) is one the file does not hold, as files from before it."""

    label: str | None | UnsetType = UNSET  # the family's name as shown ("SmolLM2-135M-Instruct (...)")
    main: str | None | UnsetType = UNSET  # the main model's source: hub id, folder, .gguf file or "bundled"
    helper: str | None | UnsetType = UNSET  # the draft as shown ("early exit @ layer 20", a helper's source)
    device: str | None | UnsetType = UNSET  # "cpu", "cuda:0", ...
    dtype: str | None | UnsetType = UNSET  # "float32", "float16 weights, float32 activations", "Q4_1 (llama.cpp)"
    draft: dict[str, Any] | UnsetType = UNSET  # the draft's declaration (`decoders.models.drafts`), tagged by kind
    device_map: str | UnsetType = UNSET  # how the model was spread over devices (a run with --device-map)
    draft_choice: str | UnsetType = UNSET  # why a "fastest" draft was chosen, in a sentence
    dtype_choice: str | UnsetType = UNSET  # why a "fastest" dtype was chosen, in a sentence
    choice_measured: str | UnsetType = UNSET  # when those choices were measured (a choice kept from then)
    backend: str | UnsetType = UNSET  # a run: "llamacpp" (left out: torch); a report: the backend's class
    weight_bytes: int | UnsetType = UNSET  # a report: bytes of weights one forward reads
    n_layers: int | UnsetType = UNSET  # a report: the main model's layers
    threads: int | UnsetType = UNSET  # a run: the torch CPU threads it ran on
