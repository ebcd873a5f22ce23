"""The n-gram index against the brute-force scan it replaces."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from decoders.methods.shared.ngram import NgramIndex


def brute_force_lookup(seq: list[int], n_max: int, n_min: int, k: int):
    """The sketch's scan: longest tail n-gram; the most recent full-k continuation, else the longest."""
    if k <= 0:
        return None
    for n in range(min(n_max, len(seq) - 1), n_min - 1, -1):
        tail = seq[-n:]
        best = None
        for st_ in range(len(seq) - n - 1, -1, -1):
            if seq[st_:st_ + n] == tail:
                cont = seq[st_ + n:st_ + n + k]
                if cont and (best is None or len(cont) > len(best[0])):
                    best = (cont, st_ + n, n)
                    if len(cont) == k:
                        break
        if best is not None:
            return best
    return None


@settings(max_examples=400, deadline=None)
@given(seq=st.lists(st.integers(0, 4), min_size=1, max_size=60), n_min=st.integers(1, 3),
       extra=st.integers(0, 3), k=st.integers(0, 8), split=st.integers(0, 60))
def test_index_matches_brute_force(seq, n_min, extra, k, split):
    n_max = n_min + extra
    index = NgramIndex(n_min, n_max, seq[:split])
    index.extend(seq[split:])  # built incrementally, as during decoding
    found = index.lookup(k)
    expected = brute_force_lookup(seq, n_max, n_min, k)
    assert (None if found is None else tuple(found)) == (None if expected is None else tuple(expected))


def test_lookup_reports_where_the_copy_starts():
    seq = [7, 1, 2, 3, 4, 5, 9, 1, 2]
    draft, start, n = NgramIndex(1, 3, seq).lookup(3)
    assert (draft, start, n) == ([3, 4, 5], 3, 2)
