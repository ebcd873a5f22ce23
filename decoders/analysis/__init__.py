"""The figures: counts over a run's records, the summary, timing and its spread, theory.
No torch at import."""
