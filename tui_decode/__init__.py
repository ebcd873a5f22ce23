"""tui-decode: watch parallel LLM decoding happen, token by token, and measure what it buys."""

from decoders import __version__

__all__ = ["__version__"]
