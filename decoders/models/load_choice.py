"""What `load_family` chooses on the machine at hand ("fastest" dtype and draft): kept, or measured.

A load with a kept choice whose key matches (`decoders.models.kept_choice`) builds the target in
the kept dtype and only the kept draft, and measures nothing. Otherwise it measures, as
`decoders.models.dtype_choice` and `decoders.models.draft_choice` say, and keeps the result:

* dtype and draft both "fastest" (the bundled family): chosen together, the fewest predicted
  milliseconds per token;
* a family loaded for a method that drafts with nothing (`tui-decode run --method ar`: its
  ``self_draft`` dropped) chooses the dtype alone, by the faster step, and measures no draft; a
  later load that needs a draft finds no draft kept and measures both together, once.

``spec.remeasure`` (``--remeasure``, the app's palette) measures again whatever is kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from decoders.core.errors import DecodeError
from decoders.core.events import LoadProgress
from decoders.models.kept_choice import REMEASURE_HINT, ChoiceKey, KeptChoice

#: Bytes a weight of the float32 model takes while its float16 copy is packed (the fused float32
#: copies, the float16 conversion, fbgemm's packed matrices): on the bundled SmolLM2-135M the
#: peak address space rose by 1.15 GB, 8.6 bytes a weight (2026-12-04). Too few, and fbgemm's
#: packing met a refused allocation with a segmentation fault (`ulimit -v 3000000`, issue 40).
PACKING_BYTES = 9


def float16_room(main_model) -> str | None:
    """Why float16 weights of ``main_model`` cannot be packed now (too little free memory, or room
    under ``ulimit -v``: the packing kernels meet a refused allocation with a segmentation fault),
    or None when they can (or the free memory is not known)."""
    from decoders.models.memory import available_memory, format_bytes

    needed = sum(p.numel() for p in main_model.parameters()) * PACKING_BYTES
    free = available_memory()
    if free is not None and needed > free:
        return f"packing them needs about {format_bytes(needed)} and only {format_bytes(free)} is free"
    return None


@dataclass
class LoadChoice:
    """One load's choice: read from the kept record at the start, measured where it is missing."""

    spec: Any
    main_model: Any
    tokenizer: Any
    report: LoadProgress
    stop_ids: frozenset[int] = frozenset()
    wants_dtype: bool = False  # float32 or float16 weights to choose (CPU, the fast backend)
    wants_draft: bool = False  # int4 or the trained head to choose
    key: ChoiceKey | None = None
    kept: KeptChoice | None = None  # a kept choice that covers what this load chooses
    notes: list[str] = field(default_factory=list)
    dtype_record: dict | None = None
    draft_record: dict | None = None
    measured: bool = False
    _mains: dict[str, Any] | None = None  # both targets, kept for a joint measurement
    _date: str | None = None  # the day of a measurement made in this load

    @classmethod
    def start(cls, spec, device, fast: bool, device_map, main_model, tokenizer, report: LoadProgress,
              stop_ids=frozenset()) -> LoadChoice:
        """What this load chooses, and the kept choice that covers it (read here: no model work)."""
        from decoders.models.drafts import Fastest
        from decoders.models.dtype_choice import DtypeChoice, float16_reason

        choice = cls(spec, main_model, tokenizer, report, frozenset(stop_ids))
        if spec.dtype == "fastest" and device.type == "cpu":
            why = float16_reason(main_model, fast, device_map)
            if why is None:
                choice.wants_dtype = True
            else:
                choice.dtype_record = DtypeChoice("float32", left_out=why).record()
        choice.wants_draft = isinstance(spec.draft, Fastest)
        if not (choice.wants_dtype or choice.wants_draft):
            return choice
        from decoders.models.backend_choice import head_folder
        from decoders.models.kept_choice import choice_key, read_kept

        choice.key = choice_key(spec, main_model, device, fast, head_folder(spec.head, spec.main, missing_ok=True))
        if spec.remeasure:
            choice.notes.append(REMEASURE_HINT)
            return choice
        kept, problem = read_kept(choice.key)
        if problem:
            choice.notes.append(f"{problem}; measured again")
        elif kept is not None and (choice.wants_dtype and kept.dtype is None
                                   or choice.wants_draft and kept.draft is None):
            choice.notes.append("no draft chosen here yet (the starts so far drafted with nothing)")
            kept = None
        choice.kept = kept
        if choice.float16:
            short = float16_room(main_model)
            if short is not None:  # kept on a day with more memory: float32 this time, the choice kept
                choice.wants_dtype = False
                choice.dtype_record = DtypeChoice("float32", left_out=short).record()
                choice.notes.append(f"the float16 weights kept as the faster cannot be packed now: {short}; "
                                    "float32 this time")
        return choice

    @property
    def float16(self) -> bool:
        """Whether the kept choice runs the target with float16 weights (build it so at once)."""
        return self.wants_dtype and self.kept is not None and self.kept.dtype == "float16"

    def target(self, main_backend, make_fp16: Callable[[], Any]) -> tuple[Any, bool]:
        """The target to decode with and whether it has float16 weights. Kept: ``main_backend``
        as built. To measure with no draft to choose: the faster of it and ``make_fp16()``, kept.
        To measure with a draft: both are held for `draft`, and ``main_backend`` is returned."""
        if not self.wants_dtype or self.kept is not None:
            return main_backend, self.float16
        from decoders.models.backend_choice import warm_up

        self.report("Packing float16 weights to time them against float32 on this machine", 0.85)
        fp16 = self._float16_candidate(make_fp16)
        if fp16 is None:  # it cannot be built here now: float32, said, and nothing kept for the dtype
            return main_backend, False
        warm_up(main_backend)
        # float16 weights first: each draft's acceptance is measured on the first target (usually the
        # cheaper one) and reused for the second
        mains = {"float16": fp16, "float32": main_backend}
        if self.wants_draft:
            self._mains = mains
            return main_backend, False
        from decoders.models.dtype_choice import choose_target

        chosen, main_backend, _, record = choose_target(mains, self.tokenizer, report=self.report)
        self.dtype_record = record.record()
        self._keep(dtype=chosen, dtype_choice=self.dtype_record)
        return main_backend, chosen == "float16"

    def _float16_candidate(self, make_fp16: Callable[[], Any]) -> Any | None:
        """The float16-weight target, built and warmed up; None (and a note) when there is no room
        for it: refused before the packing when the free memory (or the room under ``ulimit -v``)
        is below its size, or when an allocation fails while it is packed or warmed up (an
        allocation refused inside the packing kernels could also end the process)."""
        import gc

        from decoders.models.backend_choice import warm_up
        from decoders.models.memory import format_bytes, is_allocation_failure

        short = float16_room(self.main_model)
        if short is not None:
            self._skip_float16(short)
            return None
        needed = sum(p.numel() for p in self.main_model.parameters()) * PACKING_BYTES
        try:
            backend = make_fp16()
            warm_up(backend)
        except Exception as err:
            if not is_allocation_failure(err):
                raise
            backend = None
            gc.collect()
            self._skip_float16(f"packing them ran out of memory (they need about {format_bytes(needed)})")
            return None
        return backend

    def _skip_float16(self, why: str) -> None:
        """float32 without timing float16 weights: recorded and said, and not kept (a later start
        with more memory times them)."""
        from decoders.models.dtype_choice import DtypeChoice

        self.wants_dtype = False
        self.dtype_record = DtypeChoice("float32", left_out=why).record()
        self.notes.append(f"float16 weights were not timed: {why}; float32 it is")

    def draft(self, main_backend) -> tuple[Any, Any, str, str, bool]:
        """``(target, draft backend, its description, its kind, float16 weights)``: the kept draft
        built alone, or every draft measured (on both targets when the dtype is chosen too)."""
        from decoders.models.draft_choice import build_draft, choose_for_family

        fp16 = False
        if self.kept is not None:
            kept_draft = self.kept.draft
            assert kept_draft is not None  # `start` keeps only a choice that covers the draft
            self.report(f"Building the draft chosen on this machine on {self.kept.date} ({kept_draft})", 0.9)
            try:
                backend, source = build_draft(self.spec, main_backend, self.main_model, kept_draft)
            except DecodeError as err:  # e.g. too little free memory now: the other draft may do
                self.notes.append(f"the kept draft ({kept_draft}) cannot be built now ({str(err).rstrip('.')}); "
                                  "the drafts measured again")
                fp16, kept, self.kept = self.float16, self.kept, None  # the target stays as built
                if self.wants_dtype:
                    self.dtype_record = kept.dtype_choice
            else:
                self.draft_record = self.kept.draft_choice
                return main_backend, backend, source, kept_draft, self.float16
        self.report("Building the drafts to choose from (int4, the trained head)", 0.88)
        measured: dict[str, tuple[list[float], str]] = {}  # each draft's acceptance, measured once
        if self._mains:  # the target's dtype and the draft chosen together: the fewest ms per token
            from decoders.models.dtype_choice import choose_target

            mains, at = self._mains, self._fractions(len(self._mains))
            self._mains = None
            chosen, main_backend, picked, record = choose_target(
                mains, self.tokenizer, lambda main: choose_for_family(
                    self.spec, main, self.main_model, self.tokenizer, self.report, self.stop_ids, measured,
                    next(at)), self.report)
            fp16, self.dtype_record = chosen == "float16", record.record()
            assert picked is not None  # choose_target drafts for each main when given draft_for
            helper, source, kind, choice = picked
        else:
            helper, source, kind, choice = choose_for_family(self.spec, main_backend, self.main_model, self.tokenizer,
                                                             self.report, self.stop_ids, measured, 0.92)
        self.draft_record = choice.as_dict() | {"sentence": choice.sentence()}
        dtype = ({"dtype": "float16" if fp16 else "float32", "dtype_choice": self.dtype_record}
                 if self.wants_dtype else {})
        self._keep(draft=kind, draft_choice=self.draft_record, **dtype)
        return main_backend, helper, source, kind, fp16

    def finish(self) -> None:
        """After the target and draft: a kept choice's records, and its one line."""
        if self.kept is not None:
            if self.wants_dtype:
                self.dtype_record = self.kept.dtype_choice
            self.notes.append(f"as measured on this machine on {self.kept.date}, kept")

    @property
    def note(self) -> str | None:
        """One line on where the choice came from (kept, measured and why), or None."""
        return "; ".join(self.notes) or None

    @property
    def date(self) -> str | None:
        """The day the choice in use was measured (None: nothing chosen here)."""
        return self.kept.date if self.kept is not None else self._date

    def _keep(self, **choice: Any) -> None:
        from decoders.models.kept_choice import choice_file, keep

        assert self.key is not None  # a measurement happens only where a key was made
        kept, problem = keep(self.key, **choice)
        self.measured, self._date = True, kept.date
        self.notes.append(problem or f"measured on this machine now and kept in {choice_file(self.key)}")

    def _fractions(self, n: int):
        """The progress while each target's drafts are timed: rising, never back."""
        for i in range(n):
            yield 0.86 + 0.1 * (i + 0.5) / n
