"""How a token's text is shown: whitespace and control characters made visible, and the bytes of
a byte-level BPE token read directly (so a partial UTF-8 sequence shows as "<0x..>", not "�").
Pure string work: no torch, no tokenizer import."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

BYTE_TOKEN = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")
_CONTROL_SIGNS = {"\n": "↵", "\t": "→", "\r": "␍"}


def visible_text(text: str) -> str:
    """``text`` with whitespace and control characters made visible (see `Family.display`).

    Undecodable bytes arrive as surrogate escapes (U+DC80..U+DCFF) and come out as "<0x..>".
    """
    whitespace_only = text.isspace()
    out = []
    for char in text:
        code = ord(char)
        if char in _CONTROL_SIGNS:
            out.append(_CONTROL_SIGNS[char])
        elif 0xDC80 <= code <= 0xDCFF:
            out.append(f"<0x{code - 0xDC00:02X}>")
        elif char == " " and whitespace_only:
            out.append("·")
        elif unicodedata.category(char) == "Cc":
            out.append(f"<0x{code:02X}>" if code < 0x100 else f"<U+{code:04X}>")
        else:
            out.append(char)
    return "".join(out)


def byte_level_reader(tokenizer) -> Callable[[str], bytes | None] | None:
    """For GPT-2 style byte-level BPE tokenizers, a function from token string to its bytes.

    Decoding a single token through the tokenizer would turn a partial UTF-8 sequence into
    "�"; reading the bytes directly lets the display show them as "<0x..>".
    """
    decoder = getattr(getattr(tokenizer, "backend_tokenizer", None), "decoder", None)
    if decoder is None or "ByteLevel" not in repr(decoder):
        return None
    byte_of = {char: byte for byte, char in _gpt2_bytes_to_unicode().items()}

    def token_bytes(raw: str) -> bytes | None:
        if not raw or any(char not in byte_of for char in raw):
            return None
        return bytes(byte_of[char] for char in raw)

    return token_bytes


def _gpt2_bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from the 256 byte values to printable characters."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    codes = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    return {byte: chr(code) for byte, code in zip(printable, codes, strict=False)}
