"""GGUF files for the tests: a whole one that holds no tensors (a conversion faked behind
transformers' loaders reads nothing from it), and damaged ones cut from it."""

from __future__ import annotations

import struct


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def empty_gguf(architecture: str = "llama", padding: int = 0) -> bytes:
    """A GGUF v3 file whose header is whole: its architecture, no tensors, padded to the data
    section's 32-byte boundary as a writer pads it; ``padding`` zero bytes after."""
    key_value = _string("general.architecture") + struct.pack("<I", 8) + _string(architecture)
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + key_value
    return head + bytes(-len(head) % 32) + bytes(padding)


def gguf_with_a_tensor(data_bytes: int) -> bytes:
    """A GGUF v3 file whose table holds one 4x8 float32 tensor (128 bytes) but only ``data_bytes``
    of its data: whole at 128, truncated below."""
    key_value = _string("general.architecture") + struct.pack("<I", 8) + _string("llama")
    tensor = _string("w") + struct.pack("<I", 2) + struct.pack("<2Q", 8, 4) + struct.pack("<IQ", 0, 0)
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + key_value + tensor
    head += bytes(-len(head) % 32)  # the data starts at the next 32-byte boundary
    return head + bytes(data_bytes)
