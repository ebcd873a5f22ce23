"""Textual-free application state: settings, the live run, the history, the loaded family,
batching, the runs folder, and the help text."""
