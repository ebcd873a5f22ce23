"""What a run is, in memory and on disk: run records, the saved-file format with its
old-schema migration, atomic writes and bounded reads. No torch at import."""
