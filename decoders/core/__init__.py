"""The bottom layer: errors, events, and the declarations of methods and their parameters.

No torch, no file I/O, no Textual: everything may import it."""
