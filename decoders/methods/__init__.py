"""The decoding methods, listed here explicitly: one module each, and importing this package
registers them all (each module calls ``register(Method(...))`` at import; see
`decoders.core.declarations`). What several methods share lives in `decoders.methods.shared`.
No module here imports torch at import time, so listing the methods and their parameters is cheap.

A new method is one module here, added to this list; nothing else names it.
"""

from decoders.methods import autoregressive, jacobi, lookahead, prompt_lookup, speculative, suffix

#: The registered methods' modules, in the order they are listed.
BUILTIN = (autoregressive, speculative, prompt_lookup, suffix, jacobi, lookahead)

__all__ = ["BUILTIN"]
