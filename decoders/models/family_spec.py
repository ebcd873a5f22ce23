"""What to load (`FamilySpec`): a family's sources, its draft, device, dtype and backend; names,
cheap to build and to store in config (`decoders.models.families`). `decoders.models.family.load_family`
turns one into a loaded `decoders.models.family.Family`.
"""

from __future__ import annotations

from dataclasses import dataclass

from decoders.models.drafts import Draft, EarlyExit, HelperModel, head_of, self_draft_kind


@dataclass
class FamilySpec:
    """What to load. A source is "bundled", a .gguf path, a model folder, or a hub id."""

    name: str
    main: str
    draft: Draft | None = None  # what drafts (`decoders.models.drafts`); None: nothing
    device: str = "auto"
    dtype: str = "auto"
    label: str | None = None
    # "auto" | "balanced" | "sequential", a {module: device} dict or a .json file of one: spread
    # the models over every visible GPU, the CPU and disk with accelerate (transformers backend)
    device_map: str | dict | None = None
    cuda_graph: str = "auto"  # the fast backend's one-token step from a CUDA graph: auto (CUDA only), on, off
    backend: str = "torch"  # or "llamacpp": GGUF files run by llama.cpp as stored (`decoders.backends.llamacpp`)
    remeasure: bool = False  # measure the "fastest" dtype and draft again, whatever this machine kept

    # Views of ``draft`` by the names the spec had before `Draft` (read-only).
    @property
    def helper(self) -> str | None:
        """The helper model's source, when a helper model drafts."""
        return self.draft.source if isinstance(self.draft, HelperModel) else None

    @property
    def self_draft_layer(self) -> int | None:
        """The early-exit layer, when an early exit drafts."""
        return self.draft.layer if isinstance(self.draft, EarlyExit) else None

    @property
    def self_draft(self) -> str | None:
        """The kind of a draft built from the main model ("int4", "head", "fastest", ...)."""
        return self_draft_kind(self.draft)

    @property
    def head(self) -> str | None:
        """The trained head's folder the draft names ("bundled": the shipped head)."""
        head = head_of(self.draft)
        return head.folder if head is not None else None
