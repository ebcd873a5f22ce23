"""KV-cached runner: reuse the longest prefix the cache already holds, run only what is new."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence, cast

from decoders.backends.capabilities import AdoptsCache, Tapped
from decoders.backends.hf import Backend
from decoders.backends.host import to_device

if TYPE_CHECKING:
    from decoders.backends.tree import TokenTree


@dataclass
class ForwardLog:
    """One forward pass: how many positions it ran and how long it took (device synchronised)."""

    positions: int
    keep: int
    seconds: float


class TimingEvent(Protocol):
    """What `ForwardTimer` needs of an event: ``torch.cuda.Event(enable_timing=True)``."""

    def record(self) -> object: ...

    def synchronize(self) -> object: ...

    def elapsed_time(self, end_event: Any, /) -> float: ...  # torch: end_event: Event


class EventLog(ForwardLog):
    """A forward timed by two CUDA events: ``seconds`` is read from them on first use.

    Recording an event does not wait for the device; reading the time waits for the end event
    only, which has completed once the iteration's host transfer is done. Methods read their
    forwards' times after that transfer, so timing adds no synchronisation to the hot loop.
    """

    def __init__(self, positions: int, keep: int, start: TimingEvent, end: TimingEvent):
        self.positions, self.keep = positions, keep
        self._events: tuple[TimingEvent, TimingEvent] | None = (start, end)
        self._seconds: float | None = None

    @property  # type: ignore[override]
    def seconds(self) -> float:
        if self._seconds is None:
            assert self._events is not None  # dropped only once the time is read
            start, end = self._events
            end.synchronize()
            self._seconds = start.elapsed_time(end) / 1000.0
            self._events = None
        return self._seconds

    @seconds.setter
    def seconds(self, value: float) -> None:
        self._seconds = float(value)


class ForwardTimer:
    """Times forwards: a clock read before and after (CPU, MPS, or a clock a test gives), or a
    pair of CUDA events (no host sync; see `EventLog`)."""

    def __init__(self, clock: Callable[[], float] | None = None, events: Callable[[], TimingEvent] | None = None):
        self.clock = clock
        self.events = events  # makes one event; None: time by the clock

    @classmethod
    def for_device(cls, device, clock: Callable[[], float] | None = None) -> ForwardTimer:
        if clock is None and getattr(device, "type", "cpu") == "cuda":
            import torch

            return cls(events=lambda: torch.cuda.Event(enable_timing=True))
        return cls(clock=clock or device_clock(device))

    def start(self):
        if self.events is not None:
            event = self.events()
            event.record()
            return event
        assert self.clock is not None  # for_device gives a timer either events or a clock
        return self.clock()

    def stop(self, started, positions: int, keep: int) -> ForwardLog:
        if self.events is not None:
            end = self.events()
            end.record()
            return EventLog(positions, keep, started, end)
        assert self.clock is not None
        return ForwardLog(positions, keep, self.clock() - started)


def device_clock(device) -> Callable[[], float]:
    """A clock for iteration and run times.

    On CUDA a plain ``perf_counter``: methods read it right after their iteration's host
    transfer, which has already waited for the device, and forwards are timed by events. On
    MPS the clock waits for queued work first, so that times are real.
    """
    kind = getattr(device, "type", "cpu")
    if kind == "mps":
        import torch

        def clock() -> float:
            torch.mps.synchronize()
            return time.perf_counter()

        return clock
    return time.perf_counter


class KVRunner:
    """Runs token sequences on a backend, keeping its cache in step with the tokens it holds.

    ``run(seq, keep)`` crops the cache to the longest common prefix of ``seq`` and what it holds,
    runs the rest, and returns the logits of the last ``keep`` positions. ``extend`` appends
    tokens already on the device (a draft loop) without a host sync; ``name_tail`` tells the
    runner which token ids they were once the caller knows, so the next ``run`` reuses them.
    ``run_tree`` verifies a `decoders.backends.tree.TokenTree` of candidates in one forward and
    ``keep_path`` then keeps the cache of the accepted root-to-node path only.

    ``held[i]`` is the token id at cache position ``i``, or None when unknown (unnamed device
    tokens, or tree nodes, whose slots do not match their sequence positions).
    """

    def __init__(self, backend: Backend, clock: Callable[[], float] | None = None):
        import torch

        self.backend = backend
        self.clock = clock or device_clock(backend.device)
        self.timer = ForwardTimer.for_device(backend.device, clock)
        self.held: list[int | None] = []
        self.log: list[ForwardLog] = []
        # the copies `follow` made before forwards (positions: how many), timed apart from the
        # forwards: a trained head's catch-up runs its layer over every position verified since
        # it last drafted, which is not the cost of one draft step
        self.catch_up: list[ForwardLog] = []
        self._torch = torch
        # (tree, prefix length) of the last run_tree, until keep_path or a crop
        self._tree: tuple[TokenTree, int] | None = None
        # `follow`: the runner whose cache this one copies before each run, and how many leading
        # positions here are such copies
        self.source: KVRunner | None = None
        self.adopted = 0

    # -- bookkeeping -------------------------------------------------------------------------
    @property
    def n_forward(self) -> int:
        return len(self.log)

    @property
    def n_positions(self) -> int:
        return sum(f.positions for f in self.log)

    def reset(self) -> None:
        """Forget the cache and the log: the next run starts from nothing (a fair timing)."""
        self.backend.reset()
        self.held = []
        self.log = []
        self.catch_up = []
        self._tree = None
        self.adopted = 0

    def follow(self, source: KVRunner | None) -> str | None:
        """Copy ``source``'s cache, where it holds this run's prefix, before each ``run`` (None:
        stop). For a self-draft (an early exit or a quantized copy of ``source``'s model) the
        target's keys and values stand in for the draft's own: no draft prefill, no catch-up
        forward over the tokens the target verified. Returns why it cannot (and does not follow),
        or None."""
        reason = None
        if source is not None:
            reason = (self.backend.adopt_reason(source.backend) if isinstance(self.backend, AdoptsCache)
                      else "its backend cannot take another's cache")
        if self.source is not (None if reason else source):
            self.crop(0)  # what was copied from the old source is not this runner's to reuse
        self.source = None if reason else source
        if source is not None and isinstance(source.backend, Tapped):
            # a trained head reads the target's hidden states: the target keeps them while this
            # draft follows it, and stops (no cost) for any other draft
            mine = self.backend.tap if isinstance(self.backend, Tapped) else None
            source.backend.tap = mine if self.source is not None else None
        return reason

    def mark(self) -> tuple[int, int]:
        """Where the forward and catch-up logs stand now, for `seconds_since`."""
        return len(self.log), len(self.catch_up)

    def seconds_since(self, mark: tuple[int, int]) -> float:
        """Seconds of the forwards and catch-ups logged since ``mark`` (read after the iteration's
        host transfer: no wait on CUDA events)."""
        return sum(f.seconds for f in self.log[mark[0]:]) + sum(f.seconds for f in self.catch_up[mark[1]:])

    def mean_seconds(self, positions: int | None = 1) -> float | None:
        """Mean time of forwards that ran ``positions`` positions (None: all forwards)."""
        times = [f.seconds for f in self.log if positions is None or f.positions == positions]
        return sum(times) / len(times) if times else None

    # -- running -----------------------------------------------------------------------------
    def run(self, seq: Sequence[int], keep: int = 1, tail=None):
        """Logits ``[keep, vocab]`` (float32) of the last ``keep`` positions of ``seq``.

        ``tail``, a 1-D device tensor, is appended after ``seq`` without reading it on the host
        (drafted tokens); name it afterwards with ``name_tail`` so later runs can reuse it.
        """
        n_tail = 0 if tail is None else int(tail.numel())
        total = len(seq) + n_tail
        if keep < 1 or keep > total:
            raise ValueError(f"keep must be in 1..{total}, got {keep}")
        if self.source is not None:  # the copy is timed on its own (`catch_up`), not as this forward
            started = self.timer.start()
            copied = self._adopt(seq, min(total - keep, len(seq)))
            if copied:
                self.catch_up.append(self.timer.stop(started, copied, 0))
        # kept positions are always recomputed
        self.crop(self._common_prefix(seq, min(len(self.held), total - keep, len(seq))))
        common = len(self.held)
        fresh = list(seq[common:])
        new = to_device(fresh, self.backend.device)
        if n_tail:
            new = self._torch.cat([new, tail.reshape(-1).to(self._torch.long)])
        return self._forward(new, keep, fresh + [None] * n_tail)

    def _adopt(self, seq: Sequence[int], limit: int) -> int:
        """Copy the source's cached positions that hold ``seq[:limit]`` and are not copies here
        yet; how many it copied."""
        source = self.source
        assert source is not None  # run adopts only while following a source
        # follow sets a source only where the backend's adopt_reason accepted it
        backend = cast(AdoptsCache, self.backend)
        end = common_prefix(source.held, seq, min(limit, len(source.held), source.backend.cached_length))
        start = min(self.adopted, common_prefix(self.held, source.held, min(end, len(self.held))))
        if end > start:
            self.crop(start)
            backend.adopt_cache(source.backend, start, end)
            self.held[start:] = source.held[start:end]
            self.adopted = end
            return end - start
        return 0

    def extend(self, ids, keep: int = 1):
        """Append device tokens ``ids`` (1-D) after what the cache holds; ids are named later."""
        return self._forward(ids.reshape(-1), keep, [None] * int(ids.numel()))

    def name_tail(self, ids: Sequence[int]) -> None:
        """Record the ids of the last ``len(ids)`` held positions (appended by ``extend``)."""
        if ids:
            self.held[len(self.held) - len(ids):] = list(ids)

    def run_tree(self, seq: Sequence[int], tree):
        """Logits ``[1 + len(tree), vocab]`` (float32) of a token tree after ``seq``, one forward.

        Row 0 predicts the token after ``seq``; row ``1 + i`` the token after node ``i``, as if
        the root-to-node path of ``i`` followed ``seq``. The cache is cropped to the common
        prefix of ``seq`` and what it holds (the last token of ``seq`` is always rerun), then the
        rest of ``seq`` and every node run at positions ``len(seq) + depth`` under the ancestor
        mask. The nodes' cache slots are held unnamed; follow with ``keep_path`` (or a ``run``,
        which crops them away).
        """
        torch = self._torch
        if not seq:
            raise ValueError("run_tree needs a non-empty prefix")
        self.crop(self._common_prefix(seq, min(len(self.held), len(seq) - 1)))
        common = len(self.held)
        fresh = list(seq[common:])
        m, n = len(fresh), len(tree)
        device = self.backend.device
        ids = to_device(fresh + list(tree.tokens), device)
        # positions and mask stay on the host: the backend reads the largest position there and
        # moves them without a sync (`decoders.backends.host.move`)
        positions = torch.tensor(list(range(common, len(seq))) + [len(seq) + d for d in tree.depth],
                                 dtype=torch.long)
        mask = torch.ones(m + n, m + n, dtype=torch.bool).tril_()  # the prefix part: causal
        if n:
            mask[m:, m:] = tree.ancestor_mask()  # nodes see the whole prefix, then their ancestors
        logits = self._forward(ids, 1 + n, fresh + [None] * n, positions=positions, mask=mask)
        self._tree = (tree, len(seq))
        return logits

    def keep_path(self, nodes: Sequence[int]) -> None:
        """After ``run_tree``: keep the prefix plus the root-to-node path ``nodes`` (node indices,
        e.g. ``tree.path(i)``; empty keeps the prefix only), compacted and named, so that the next
        forward continues from the end of that path."""
        if self._tree is None:
            raise ValueError("keep_path needs a run_tree just before it")
        tree, start = self._tree
        nodes = [int(i) for i in nodes]
        if not tree.is_path(nodes):
            raise ValueError(f"{nodes} is not a root-to-node path of the tree")
        self.backend.compact(start, nodes)
        self.held[start:] = [tree.tokens[i] for i in nodes]
        self._tree = None

    def crop(self, length: int) -> None:
        if length < len(self.held):
            self.backend.crop(length)
            # a backend that could not crop so far (a sliding-window cache) starts over shorter
            del self.held[min(length, self.backend.cached_length):]
            self._tree = None
        self.adopted = min(self.adopted, len(self.held))

    def _common_prefix(self, seq: Sequence[int], limit: int) -> int:
        """How many leading positions (at most ``limit``) ``held`` shares with ``seq``."""
        return common_prefix(self.held, seq, limit)

    def _forward(self, ids, keep: int, names: list[int | None], **options):
        if len(self.held) + len(names) > self.backend.max_positions:
            from decoders.core.errors import DecodeError

            raise DecodeError(f"the sequence reached {len(self.held) + len(names)} positions, beyond the model's "
                              f"context of {self.backend.max_positions}; lower max_new_tokens or shorten the prompt")
        self._tree = None  # any forward ends the use of the last tree's slots
        started = self.timer.start()
        logits = self.backend.forward(ids, keep, **options)
        self.held.extend(names)
        self.log.append(self.timer.stop(started, len(names), keep))
        return logits


def common_prefix(held: Sequence[int | None], seq: Sequence[int | None], limit: int) -> int:
    """How many leading positions (at most ``limit``, which both must reach) ``held`` shares with ``seq``."""
    if list(held[:limit]) == list(seq[:limit]):  # the usual case, compared in C
        return limit
    common = 0
    while held[common] == seq[common]:
        common += 1
    return common
