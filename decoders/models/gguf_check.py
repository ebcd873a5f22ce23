"""Whether a GGUF file is whole, checked before it is converted: a file cut short by an interrupted
download, or one whose header holds impossible sizes, is one line saying so and how to fix it,
not the parser's internals ("unpack_from requires a buffer of at least 101 bytes ...", "cannot
reshape array of size 214336 into shape (49152,612)").

The header and the tensor table are read (transformers' own GGUF reader, which reads no tensor
data); every tensor's bytes must then lie inside the file.
"""

from __future__ import annotations

import struct
from pathlib import Path

from decoders.core.errors import DecodeError

FIX = "download it again, or pass another .gguf file"
#: What the reader raises on a header it cannot walk: a read past the end (struct.error), an
#: impossible count or length (IndexError, OverflowError, MemoryError), bytes that are not text.
_DAMAGED = (struct.error, IndexError, OverflowError, MemoryError, UnicodeDecodeError, KeyError)


def _header_reader():
    try:
        from transformers.integrations.gguf.reader import GgufHeader
    except ImportError:  # another transformers: its own loader says what it says
        return None
    return GgufHeader


def check_gguf_intact(path: str | Path) -> None:
    """DecodeError when ``path``'s header cannot be read or its tensors run past its end."""
    path = Path(path)
    reader = _header_reader()
    if reader is None:
        return
    size = path.stat().st_size
    try:
        header = reader.from_file(str(path))
    except _DAMAGED:
        raise DecodeError(f"the GGUF file {path} is truncated or damaged: its header ends early or holds "
                          f"impossible sizes ({size} bytes in all); {FIX}") from None
    except ValueError as err:
        text = str(err)
        if text.startswith(str(path)):  # the reader's own words: another version, no architecture
            raise DecodeError(f"transformers cannot load GGUF file {path}: {text}") from None
        raise DecodeError(f"the GGUF file {path} is truncated or damaged: its header cannot be read "
                          f"({size} bytes in all); {FIX}") from None
    end = max((header.data_start + t.offset + t.nbytes for t in header.tensors), default=header.data_start)
    if end > size:
        raise DecodeError(f"the GGUF file {path} is truncated or damaged: its tensors run to byte {end} but the "
                          f"file ends at byte {size}; {FIX}")
