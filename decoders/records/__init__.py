"""What a run is, in memory and on disk: run records, the saved-file format with its
old-schema migration, atomic writes and bounded reads. No torch at import.

The records layer imports nothing from the method registry (`decoders.core.declarations`) or the
method modules (`decoders.methods`): detail kinds register themselves here when their method
module is imported (`decoders.records.details`), and whoever opens saved runs imports the methods
first, or passes ``details=`` to `RunResult.load`.
"""

from decoders.records.details import DETAIL_KINDS, Detail, TopK, detail_union, register_detail
from decoders.records.rows import DraftRow, Emitted, TopEntry
from decoders.records.run import SCHEMA_VERSION, Iteration, Run, RunResult

__all__ = [
    "DETAIL_KINDS", "SCHEMA_VERSION", "Detail", "DraftRow", "Emitted", "Iteration", "Run",
    "RunResult", "TopEntry", "TopK", "detail_union", "register_detail",
]
