"""The traffic between the host and the model's device, in one place.

Every value a method reads back from the device goes through `to_host`: one call is one
device-to-host copy, the only point where the host waits for the device's queue. Methods make
one such call per iteration (the gpt-fast pattern); tests count the calls (`TRANSFERS`).

The pack is float32, never float64: Apple's MPS has no float64 (a float64 cast there raises), and
every value packed is float32 already (probabilities) or an integer below 2**24 (token ids,
counts), which float32 holds exactly.

`to_device` moves token ids the host knows onto the device: on CUDA through pinned memory and
``non_blocking``, so that the copy queues behind the device's work instead of waiting for it
(a plain ``torch.tensor(..., device="cuda")`` synchronises the stream).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    import torch

#: The dtype of the one host transfer: exact for float32 values and integers below 2**24.
PACK_DTYPE_NAME = "float32"
#: Integers past this lose precision in the float32 pack (no vocabulary comes near it).
EXACT_INT_LIMIT = 1 << 24


class TransferCounter:
    """How many device-to-host transfers `to_host` made (tests reset and read it)."""

    def __init__(self) -> None:
        self.count = 0

    def reset(self) -> None:
        self.count = 0


TRANSFERS = TransferCounter()


def to_host(parts: Sequence[torch.Tensor]) -> list[float]:
    """One device-to-host copy of every tensor in ``parts``, flattened in order, as floats."""
    import torch

    TRANSFERS.count += 1
    packed = torch.cat([x.reshape(-1).to(torch.float32) for x in parts])
    return packed.tolist()


def to_device(values: Sequence[int], device, dtype=None) -> torch.Tensor:
    """A 1-D tensor of ``values`` on ``device`` (long by default), without a host sync on CUDA."""
    import torch

    dtype = dtype or torch.long
    if getattr(device, "type", device) == "cuda":
        return torch.tensor(list(values), dtype=dtype, pin_memory=True).to(device, non_blocking=True)
    return torch.tensor(list(values), dtype=dtype, device=device)


def move(tensor: torch.Tensor, device) -> torch.Tensor:
    """A host tensor on ``device``: non-blocking (through pinned memory) on CUDA."""
    if tensor.device == device or getattr(device, "type", device) != "cuda" or tensor.device.type != "cpu":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)
