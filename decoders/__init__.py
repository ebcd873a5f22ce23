"""tui-decode's decoding engine: model families, a KV-cached runner, parallel decoding methods and
their run records. It never imports Textual; the app holds an engine, never the reverse."""

__version__ = "0.1.0"
