"""Decoding methods, one module each: a module that calls ``register(Method(...))`` at import
is a method (see `decoders.core.declarations`, which finds and imports every module here on first
use of the registry). No module here imports torch at import time, so listing the methods and
their parameters is cheap.
"""
