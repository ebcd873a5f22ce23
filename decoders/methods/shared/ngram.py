"""The n-gram index behind prompt lookup: where did the sequence's tail occur before?"""

from __future__ import annotations

from collections import defaultdict


class NgramIndex:
    """Positions that follow each n-gram (n_min..n_max) of a growing token sequence.

    Appending is O(n_max) per token and a lookup is O(occurrences of the tail), where a scan of
    the whole sequence per iteration (the sketch) is O(length x n).
    """

    def __init__(self, n_min: int, n_max: int, seq: list[int] | None = None):
        self.n_min, self.n_max = n_min, n_max
        self.seq: list[int] = []
        self._after: dict[int, dict[tuple[int, ...], list[int]]] = {
            n: defaultdict(list) for n in range(n_min, n_max + 1)}
        self.extend(seq or [])

    def extend(self, tokens: list[int]) -> None:
        for t in tokens:
            self.seq.append(t)
            end = len(self.seq)
            # index the n-grams that end at the previous position: their continuation starts at end-1
            for n in range(self.n_min, self.n_max + 1):
                if end - 1 >= n:
                    self._after[n][tuple(self.seq[end - 1 - n:end - 1])].append(end - 1)

    def lookup(self, k: int) -> tuple[list[int], int, int] | None:
        """Up to ``k`` tokens that followed the longest earlier match of the sequence's tail.

        Returns (draft, start, n): ``start`` is where the copied tokens begin in the sequence,
        ``n`` the n-gram length. Among matches of the longest n-gram, the most recent one with a
        full ``k``-token continuation wins, else the one with the longest continuation.
        """
        seq, length = self.seq, len(self.seq)
        if k <= 0:
            return None
        for n in range(min(self.n_max, length - 1), self.n_min - 1, -1):
            starts = self._after[n].get(tuple(seq[length - n:]))
            if not starts:
                continue
            full = [s for s in starts if length - s >= k]
            start = full[-1] if full else starts[0]  # continuations shrink as the start moves right
            return seq[start:start + k], start, n
        return None

    def lookup_many(self, k: int, branches: int) -> list[tuple[list[int], int, int]]:
        """Up to ``branches`` distinct continuations (up to ``k`` tokens each) of the sequence's
        tail, as (draft, start, n): first the one `lookup` picks, then the longest n-gram's other
        matches, the most recent first, then shorter n-grams' matches. A continuation that is a
        prefix of one already taken adds nothing and is left out; one that extends a taken one
        replaces it."""
        first = self.lookup(k)
        if first is None or branches <= 0:
            return []
        out = [first]
        seq, length = self.seq, len(self.seq)
        for n in range(first[2], self.n_min - 1, -1):
            for start in reversed(self._after[n].get(tuple(seq[length - n:]), ())):
                if len(out) == branches:
                    return out
                draft = seq[start:start + k]
                if any(d[:len(draft)] == draft for d, _, _ in out):
                    continue
                shorter = [i for i, (d, _, _) in enumerate(out) if draft[:len(d)] == d]
                if shorter and shorter[0] > 0:
                    out[shorter[0]] = (draft, start, n)
                elif not shorter:
                    out.append((draft, start, n))
        return out
