"""A Spec-Bench-style benchmark, measured side by side with transformers in one run.

Users pick a method and its parameters from these numbers, so they are measured honestly:

* every prompt gets a fresh `Engine` (so the autoregressive baseline is decoded again, never a
  cached timing), and our runs alternate with transformers' (ours, theirs, ours, ...) so that
  load from other processes on the machine hits both sides alike;
* speedups follow Spec-Bench (`evaluation/speed.py`): mean per-prompt tokens/s of a method over
  mean per-prompt tokens/s of autoregressive decoding on the same prompts; tau ("mean accepted
  tokens") is pooled, i.e. all emitted tokens over all target forwards;
* every output is compared with the autoregressive baseline and with transformers' output, and
  the first divergence is kept, never hidden;
* the memory-bandwidth floor (weight bytes / read bandwidth measured in the same run) says how
  far one decode step is from what the hardware allows.

The report dict is JSON-ready; `decoders.bench_report` renders it as markdown.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from decoders.errors import DecodeError
from decoders.hf_reference import HFReference, HFRun, transformers_model
from decoders.params import METHOD_NAMES, METHODS, DecodeParams
from decoders.records import KIND_ACCEPTED, RunResult
from decoders.summary import first_divergence
from decoders.theory import cost_aware_speedup, predicted_speedup

if TYPE_CHECKING:
    from decoders.family import Family

REPORT_SCHEMA = 1

#: Spec-Bench's task groups, in its column order: (key, label, categories).
TASK_GROUPS: tuple[tuple[str, str, frozenset[str]], ...] = (
    ("multi_turn", "multi-turn conversation",
     frozenset({"writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"})),
    ("translation", "translation", frozenset({"translation"})),
    ("summarization", "summarization", frozenset({"summarization"})),
    ("qa", "question answering", frozenset({"qa"})),
    ("math_reasoning", "mathematical reasoning", frozenset({"math_reasoning"})),
    ("rag", "retrieval-augmented generation", frozenset({"rag"})),
)
GROUP_LABELS = {key: label for key, label, _ in TASK_GROUPS}

#: Sweepable parameter (and its short alias) -> (method, DecodeParams field).
SWEEPABLE = {
    "gamma": ("spec", "gamma"),
    "num_pred": ("pld", "num_pred"),
    "k": ("pld", "num_pred"),
    "block": ("jacobi", "block"),
    "m": ("jacobi", "block"),
}
MAX_SWEEP_VALUES = 32

# The targets of the benchmark issue.
AR_RATIO_TARGET = 0.8  # our AR ms/token <= 0.8 x transformers generate()
THM38_TOLERANCE = 0.15  # measured speculative speedup within 15% of Theorem 3.8
RECORD_OVERHEAD_TARGET = 0.05  # recording costs <= 5% of wall time

ProgressFn = Callable[[str], None]


# -- prompts -----------------------------------------------------------------------------------

def task_group(category: str) -> str:
    """The Spec-Bench task group of a category (an unknown category is a group of its own)."""
    for key, _, categories in TASK_GROUPS:
        if category in categories:
            return key
    return category


@dataclass(frozen=True)
class BenchPrompt:
    """One Spec-Bench record, reduced to what a decoding benchmark uses: the first turn."""

    question_id: Any
    category: str
    text: str

    @property
    def group(self) -> str:
        return task_group(self.category)

    @property
    def name(self) -> str:
        return f"q{self.question_id}"


def load_prompts(path: str | os.PathLike) -> list[BenchPrompt]:
    """Read a Spec-Bench JSONL file; DecodeError naming the file and line for anything malformed."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise DecodeError(f"no prompts file at {path}; give a Spec-Bench JSONL file to --prompts "
                          "(e.g. bench/spec_bench_dev.jsonl)") from None
    except IsADirectoryError:
        raise DecodeError(f"{path} is a folder; give a Spec-Bench JSONL file to --prompts") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DecodeError(f"cannot read the prompts file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    prompts = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DecodeError(f"{where} is not valid JSON ({exc.msg}); each line must be one JSON object "
                              "with question_id, category and turns") from None
        if not isinstance(record, dict):
            raise DecodeError(f"{where} is not a JSON object; each line must hold question_id, category and turns")
        missing = [key for key in ("question_id", "category", "turns") if key not in record]
        if missing:
            raise DecodeError(f"{where} lacks {', '.join(missing)}; Spec-Bench records have question_id, "
                              "category and turns")
        turns = record["turns"]
        if not isinstance(turns, list) or not turns or not isinstance(turns[0], str) or not turns[0].strip():
            raise DecodeError(f"{where}: turns must be a list whose first item is the (non-empty) user message")
        if not isinstance(record["category"], str):
            raise DecodeError(f"{where}: category must be a string")
        prompts.append(BenchPrompt(record["question_id"], record["category"], turns[0]))
    if not prompts:
        raise DecodeError(f"{path} holds no prompts; give a Spec-Bench JSONL file with one record per line")
    return prompts


def select_prompts(prompts: Sequence[BenchPrompt], limit: int | None) -> list[BenchPrompt]:
    """The first ``limit`` prompts taken round-robin over task groups (file order within each).

    Spec-Bench files are sorted by group, so the first N lines would cover only the first
    groups; round-robin keeps a small run representative of all of them.
    """
    if limit is None or limit >= len(prompts):
        return list(prompts)
    queues: dict[str, list[BenchPrompt]] = {}
    for prompt in prompts:
        queues.setdefault(prompt.group, []).append(prompt)
    chosen: list[BenchPrompt] = []
    while len(chosen) < limit:
        for queue in queues.values():
            if queue and len(chosen) < limit:
                chosen.append(queue.pop(0))
    order = {id(p): i for i, p in enumerate(prompts)}
    return sorted(chosen, key=lambda p: (_group_rank(p.group), order[id(p)]))


def _group_rank(group: str) -> int:
    keys = [key for key, _, _ in TASK_GROUPS]
    return keys.index(group) if group in keys else len(keys)


# -- command-line values -----------------------------------------------------------------------

def parse_methods(text: str | Iterable[str]) -> tuple[str, ...]:
    """"ar,spec,pld" -> ("ar", "spec", "pld"); autoregressive always comes first (it is the baseline)."""
    names = [m.strip() for m in (text.split(",") if isinstance(text, str) else text) if m.strip()]
    if not names:
        raise DecodeError(f"no methods given; pass --methods as a comma-separated list of {', '.join(METHODS)}")
    unknown = [m for m in names if m not in METHODS]
    if unknown:
        raise DecodeError(f"unknown method {unknown[0]!r} in --methods; choose from {', '.join(METHODS)}")
    ordered = ["ar"] + [m for m in METHODS if m in names and m != "ar"]
    return tuple(ordered)


@dataclass(frozen=True)
class Sweep:
    """One parameter swept over integer values, e.g. ``gamma=1..8``."""

    name: str  # the DecodeParams field
    method: str
    values: tuple[int, ...]

    @property
    def spec(self) -> str:
        return f"{self.name}={','.join(map(str, self.values))}"


def parse_sweep(text: str) -> Sweep:
    """``NAME=A..B`` or ``NAME=a,b,c`` with NAME one of gamma, num_pred (k), block (m)."""
    hint = "write --sweep NAME=A..B or NAME=a,b,c with NAME one of gamma, num_pred (k), block (m), e.g. gamma=1..8"
    name, sep, values = text.partition("=")
    name = name.strip()
    if not sep or not values.strip():
        raise DecodeError(f"bad sweep {text!r}; {hint}")
    if name not in SWEEPABLE:
        raise DecodeError(f"cannot sweep {name!r}; {hint}")
    method, field = SWEEPABLE[name]
    try:
        if ".." in values:
            low, high = (int(v) for v in values.split("..", 1))
            if low > high:
                raise DecodeError(f"bad sweep {text!r}: {low} > {high}; {hint}")
            numbers = list(range(low, high + 1))
        else:
            numbers = [int(v) for v in values.split(",") if v.strip()]
    except ValueError:
        raise DecodeError(f"bad sweep {text!r}: the values must be integers; {hint}") from None
    if not numbers or min(numbers) < 1:
        raise DecodeError(f"bad sweep {text!r}: the values must be integers >= 1; {hint}")
    if len(numbers) > MAX_SWEEP_VALUES:
        raise DecodeError(f"bad sweep {text!r}: {len(numbers)} values, at most {MAX_SWEEP_VALUES}; {hint}")
    return Sweep(field, method, tuple(dict.fromkeys(numbers)))


# -- the machine -------------------------------------------------------------------------------

def measure_read_bandwidth(nbytes: int = 1 << 30, repeats: int = 5) -> dict[str, float]:
    """Memory read bandwidth of this machine now: the best of ``repeats`` sums of a float32
    tensor of ``nbytes`` (far larger than any cache, so every byte comes from memory), with the
    decode's thread count and with one thread per CPU, since the floor is the machine's."""
    import torch

    n = max(nbytes // 4, 1 << 20)
    data = torch.ones(n, dtype=torch.float32)  # written once, so its pages are really there
    threads = torch.get_num_threads()
    best, best_threads = float("inf"), threads
    try:
        for count in dict.fromkeys((threads, os.cpu_count() or threads)):
            torch.set_num_threads(count)
            data.sum()  # warm-up
            for _ in range(repeats):
                t0 = time.perf_counter()
                data.sum()
                seconds = time.perf_counter() - t0
                if seconds < best:
                    best, best_threads = seconds, count
    finally:
        torch.set_num_threads(threads)
    del data
    return {"bytes": n * 4, "best_ms": round(1000 * best, 3), "gb_per_s": round(n * 4 / best / 1e9, 2),
            "threads": best_threads}


def machine_info() -> dict[str, Any]:
    import torch
    import transformers

    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "load_average": load_average(),
    }


def load_average() -> list[float] | None:
    """1/5/15-minute load average: other processes on the machine skew every timing."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def reference_for(family: Family) -> HFReference:
    """transformers on the family's own model objects (same weights, same stop tokens).

    A helper with no transformers model of its own is an early-exit view of the main model, so
    transformers' counterpart is ``assistant_early_exit`` at the helper's depth.
    """
    model = getattr(family, "main_model", None)
    if model is None:
        model = transformers_model(family.main)
    helper_model = getattr(family, "helper_model", None)
    early_exit = None
    if family.helper is not None and helper_model is None and not getattr(family, "self_draft", None):
        early_exit = int(family.helper.n_layers)
    pad = getattr(family.tokenizer, "pad_token_id", None)
    return HFReference(model, family.stop_ids, pad_id=pad, helper_model=helper_model, early_exit_layer=early_exit)


# -- one prompt --------------------------------------------------------------------------------

def _verified(result: RunResult) -> int:
    """Drafts the target judged (drafts after the first rejection are never judged)."""
    return sum(min(it.n_accepted + 1, len(it.draft)) for it in result.method.iters)


def ours_entry(result: RunResult) -> dict[str, Any]:
    """What one engine run contributes to the report (speedup is added once AR is known)."""
    run, s = result.method, result.summary.to_json()
    tokens = len(run.ids)
    entry: dict[str, Any] = {
        "label": run.label,
        "tokens": tokens,
        "wall_ms": run.time_ms["wall"],
        "ms_per_token": round(run.time_ms["wall"] / max(tokens, 1), 3),
        "target_forwards": s["target_forwards"],
        "tau": s["tau"],
        "finish": run.finish,
        "identical": s.get("identical"),
        "first_divergence": s.get("first_divergence"),
        "decode_step_ms": run.time_ms.get("main_fwd_mean"),
        "ids": run.ids,
    }
    if run.method != "ar":
        entry.update(accepted=sum(1 for k in run.kinds if k == KIND_ACCEPTED), verified=_verified(result),
                     drafted=s.get("drafted"), accept_rate=s.get("accept_rate"), verify_cost=s.get("verify_cost"))
    if run.method == "spec":
        for key in ("gamma", "alpha_hat", "c_hat", "predicted_speedup", "predicted_speedup_cost_aware"):
            entry[key] = s.get(key)
    return entry


def baseline_entry(result: RunResult) -> dict[str, Any]:
    """Our autoregressive figures from the baseline decode the engine ran before the method."""
    base = result.baseline
    tokens = len(base.ids)
    return {
        "label": base.label,
        "tokens": tokens,
        "wall_ms": base.time_ms["wall"],
        "ms_per_token": round(base.time_ms["wall"] / max(tokens, 1), 3),
        "target_forwards": base.n_forward.get("main", 0),
        "tau": round(tokens / base.n_forward["main"], 3) if base.n_forward.get("main") else None,
        "finish": base.finish,
        "identical": True,
        "first_divergence": None,
        "decode_step_ms": base.time_ms.get("main_fwd_mean"),
        "ids": base.ids,
    }


def theirs_entry(run: HFRun, ar_ids: list[int] | None) -> dict[str, Any]:
    entry = run.to_json()
    if ar_ids is not None:
        entry["identical"] = run.ids == ar_ids
        entry["first_divergence"] = first_divergence(ar_ids, run.ids)
    return entry


class PromptMeasurer:
    """Runs every method on one prompt, ours and transformers' alternately.

    Order per prompt: our AR (the engine's baseline), transformers' AR, our first method (the
    engine is paused between its baseline and its method run while transformers runs), then
    per method: ours, transformers', and where measured the record=True twin, which goes before
    or after the record=False run on alternate prompts so that drift cancels.
    """

    def __init__(self, family: Family, reference: HFReference, methods: Sequence[str], base: DecodeParams,
                 record_methods: Sequence[str], tick: Callable[[str], None]):
        self.family, self.reference, self.methods = family, reference, methods
        self.base, self.record_methods, self.tick = base, record_methods, tick

    def theirs(self, method: str, ids: list[int], params: DecodeParams) -> HFRun | None:
        return self.reference.run(method, ids, params.max_new_tokens, gamma=params.gamma,
                                  num_pred=params.num_pred, ngram_max=params.ngram_max)

    def _first_run(self, engine, prompt: BenchPrompt, ids: list[int], params: DecodeParams,
                   label: str) -> tuple[RunResult, HFRun]:
        """The engine's baseline, then transformers' greedy generate(), then the method run."""
        from decoders.events import PhaseStarted

        theirs_ar = None
        self.tick("ours ar")
        for event in engine.stream(prompt.text, params):
            if isinstance(event, PhaseStarted) and event.phase == "method":
                self.tick("transformers ar")
                theirs_ar = self.reference.greedy(ids, params.max_new_tokens)
                self.tick(label)
            elif isinstance(event, RunResult):
                return event, theirs_ar
        raise RuntimeError("the engine finished without a result")

    def measure(self, prompt: BenchPrompt, ids: list[int], repeat: int, flip: bool,
                record_twins: bool = True) -> dict[str, Any]:
        from decoders.engine import Engine

        engine = Engine(self.family)  # a fresh engine: the baseline is decoded, not taken from a cache
        base = self.base
        sample: dict[str, Any] = {"question_id": prompt.question_id, "category": prompt.category,
                                  "group": prompt.group, "repeat": repeat, "prompt_tokens": len(ids),
                                  "ours": {}, "theirs": {}, "record_on": {}}
        theirs_ar_run = None
        for method in [m for m in self.methods if m != "ar"] or ["ar"]:
            params = base.replace(method=method)
            twin = record_twins and method in self.record_methods
            first_on = twin and flip  # which of the record pair runs first alternates by prompt
            label = f"ours {method}" + (" (recording on)" if first_on else "")
            if theirs_ar_run is None:
                result, theirs_ar_run = self._first_run(engine, prompt, ids, params.replace(record=first_on), label)
                sample["ours"]["ar"] = baseline_entry(result)
                sample["text"] = result.baseline.text
            else:
                self.tick(label)
                result = engine.run(prompt.text, params.replace(record=first_on))
            if method != "ar":  # an AR-only run keeps the baseline as its AR figures
                sample["record_on" if first_on else "ours"][method] = ours_entry(result)
            if method != "ar" and self.reference.available(method):
                self.tick(f"transformers {method}")
                sample["theirs"][method] = theirs_entry(self.theirs(method, ids, params), theirs_ar_run.ids)
            if twin:
                self.tick(f"ours {method}" + ("" if first_on else " (recording on)"))
                second = ours_entry(engine.run(prompt.text, params.replace(record=not first_on)))
                sample["ours" if first_on else "record_on"][method] = second
        sample["theirs"]["ar"] = theirs_entry(theirs_ar_run, None)
        ours_ar, theirs_ar = sample["ours"]["ar"], sample["theirs"]["ar"]
        for method, entry in sample["ours"].items():
            entry["speedup"] = round(ours_ar["ms_per_token"] / entry["ms_per_token"], 4)
            their = sample["theirs"].get(method)
            if their is not None:
                entry["matches_transformers"] = entry["ids"] == their["ids"]
                entry["transformers_divergence"] = first_divergence(their["ids"], entry["ids"])
        for method, entry in sample["theirs"].items():
            entry["speedup"] = round(theirs_ar["ms_per_token"] / entry["ms_per_token"], 4)
        return sample


# -- aggregation -------------------------------------------------------------------------------

def _mean(values: Iterable[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def _round(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(x, digits)


def side_stats(entries: list[dict], ar_entries: list[dict]) -> dict[str, Any]:
    """Pooled figures of one method on one side over a set of prompts.

    Speedup is Spec-Bench's: mean tokens/s of the method over mean tokens/s of AR on the same
    prompts; tau and acceptance are pooled over all iterations; ms/token is total time over
    total tokens.
    """
    tokens = sum(e["tokens"] for e in entries)
    wall = sum(e["wall_ms"] for e in entries)
    forwards = sum(e["target_forwards"] or 0 for e in entries)
    rate = _mean(1000 * e["tokens"] / e["wall_ms"] for e in entries if e["wall_ms"] > 0)
    ar_rate = _mean(1000 / e["ms_per_token"] for e in ar_entries if e["ms_per_token"] > 0)
    stats: dict[str, Any] = {
        "n": len(entries),
        "tokens": tokens,
        "ms_per_token": _round(wall / tokens if tokens else None),
        "tokens_per_s": _round(rate, 2),
        "speedup": _round(_ratio(rate, ar_rate)),
        "tau": _round(tokens / forwards if forwards else None),
    }
    if any("verified" in e for e in entries):
        verified = sum(e.get("verified") or 0 for e in entries)
        stats["acceptance"] = _round(sum(e.get("accepted") or 0 for e in entries) / verified if verified else None)
    flags = [e.get("identical") for e in entries if e.get("identical") is not None]
    if flags:
        stats["identical"] = sum(flags)
        stats["all_identical"] = all(flags)
    matches = [e["matches_transformers"] for e in entries if "matches_transformers" in e]
    if matches:
        stats["matches_transformers"] = sum(matches)
    steps = [e.get("decode_step_ms") for e in entries]
    if any(s is not None for s in steps):
        stats["decode_step_ms"] = _round(_mean(steps))
    if any(e.get("verify_cost") is not None for e in entries):
        stats["verify_cost"] = _round(_mean(e.get("verify_cost") for e in entries))
    if entries and "predicted_speedup" in entries[0]:
        stats["alpha_hat"] = _round(_mean(e["alpha_hat"] for e in entries))
        stats["c_hat"] = _round(_mean(e["c_hat"] for e in entries))
        stats["predicted_speedup"] = _round(_mean(e["predicted_speedup"] for e in entries))
        stats["predicted_speedup_cost_aware"] = _round(_mean(e.get("predicted_speedup_cost_aware") for e in entries))
    return stats


def method_stats(samples: list[dict], method: str) -> dict[str, Any]:
    """Ours, theirs and the ratios ours/theirs for one method over ``samples``."""
    ours = [s["ours"][method] for s in samples if method in s["ours"]]
    ar_ours = [s["ours"]["ar"] for s in samples if method in s["ours"]]
    out: dict[str, Any] = {"ours": side_stats(ours, ar_ours)}
    with_theirs = [s for s in samples if method in s["theirs"] and method in s["ours"]]
    if with_theirs:
        theirs = side_stats([s["theirs"][method] for s in with_theirs], [s["theirs"]["ar"] for s in with_theirs])
        out["theirs"] = theirs
        out["ratio_ms_per_token"] = _round(_ratio(out["ours"]["ms_per_token"], theirs["ms_per_token"]))
        out["ratio_speedup"] = _round(_ratio(out["ours"]["speedup"], theirs["speedup"]))
    recorded = [s for s in samples if method in s["record_on"]]
    if recorded:
        on = sum(s["record_on"][method]["wall_ms"] for s in recorded)
        off = sum(s["ours"][method]["wall_ms"] for s in recorded)
        out["record_overhead"] = _round(on / off - 1 if off else None, 4)
    return out


def aggregate(samples: list[dict], methods: Sequence[str]) -> dict[str, Any]:
    """Overall and per-group figures for every method."""
    groups: dict[str, list[dict]] = {}
    for sample in samples:
        groups.setdefault(sample["group"], []).append(sample)
    ordered = sorted(groups, key=_group_rank)
    return {
        "overall": {m: method_stats(samples, m) for m in methods},
        "groups": {g: {m: method_stats(groups[g], m) for m in methods} for g in ordered},
        "group_prompts": {g: len({s["question_id"] for s in groups[g]}) for g in ordered},
    }


# -- targets -----------------------------------------------------------------------------------

def _target(key: str, name: str, goal: str, value: str, met: bool | None, margin: str, note: str = "") -> dict:
    return {"key": key, "target": name, "goal": goal, "value": value, "met": met, "margin": margin, "note": note}


def evaluate_targets(figures: dict[str, Any], methods: Sequence[str], samples: list[dict],
                     floor_ms: float | None = None) -> list[dict]:
    """The issue's targets, each with its measured value, met or missed, by how much, and the
    run's own figures that say why."""
    overall, groups = figures["overall"], figures["groups"]
    targets = []
    ar = overall["ar"]
    ratio = ar.get("ratio_ms_per_token")
    same = sum(1 for s in samples if s["ours"]["ar"]["ids"] == s["theirs"]["ar"]["ids"])
    if ratio is not None:
        met = ratio <= AR_RATIO_TARGET
        margin = (f"{AR_RATIO_TARGET - ratio:.2f} under the limit" if met else
                  f"missed by {ratio - AR_RATIO_TARGET:.2f} ({ratio / AR_RATIO_TARGET - 1:+.0%} over the limit)")
        note = f"same tokens out on {same}/{len(samples)} prompt runs"
        if floor_ms and ar["ours"].get("decode_step_ms"):
            note += (f"; our one-token decode step is {ar['ours']['decode_step_ms']:.1f} ms, "
                     f"{ar['ours']['decode_step_ms'] / floor_ms:.1f}x the {floor_ms:.3g} ms bandwidth floor")
        targets.append(_target("ar_vs_transformers", "autoregressive ms/token vs transformers generate()",
                               f"<= {AR_RATIO_TARGET:.2f}x",
                               f"{ratio:.2f}x ({ar['ours']['ms_per_token']:.1f} vs {ar['theirs']['ms_per_token']:.1f} "
                               "ms/token)", met, margin, note))
    if "pld" in methods:
        rows = [(g, per["pld"]) for g, per in groups.items() if "theirs" in per.get("pld", {})]
        if rows:
            for key, name, field in (("pld_tau", "prompt lookup tau >= transformers' on every task group", "tau"),
                                     ("pld_speedup", "prompt lookup speedup >= transformers' on every task group",
                                      "speedup")):
                gaps = [(g, (st["ours"][field] or 0) - (st["theirs"][field] or 0)) for g, st in rows]
                worst_group, worst = min(gaps, key=lambda gap: gap[1])
                missed = [g for g, gap in gaps if gap < 0]
                by_group = dict(rows)
                note = "; ".join(
                    f"{GROUP_LABELS.get(g, g)}: ours {by_group[g]['ours'][field]:.2f} vs transformers "
                    f"{by_group[g]['theirs'][field]:.2f}" for g in missed)
                targets.append(_target(
                    key, name, "ours - transformers >= 0 on every group",
                    ", ".join(f"{GROUP_LABELS.get(g, g)} {gap:+.2f}" for g, gap in gaps), not missed,
                    f"missed on {len(missed)}/{len(gaps)} groups, worst "
                    f"{GROUP_LABELS.get(worst_group, worst_group)} {worst:+.2f}" if missed else
                    f"all {len(gaps)} groups met (smallest gap {worst:+.2f})", note))
        speed = [(g, per["pld"]["ours"]["speedup"]) for g, per in groups.items() if "pld" in per]
        speed = [(g, s) for g, s in speed if s is not None]
        if speed:
            slow = [(g, s) for g, s in speed if s < 1.0]
            worst_group, worst = min(speed, key=lambda item: item[1])
            why = []
            for g, _ in slow:
                st = groups[g]["pld"]["ours"]
                why.append(f"{GROUP_LABELS.get(g, g)}: tau {st['tau'] or 0:.2f}, "
                           f"acceptance {st.get('acceptance') or 0:.2f}, "
                           f"a verify forward costs {st.get('verify_cost') or 0:.2f}x a one-token step")
            targets.append(_target(
                "pld_not_slower", "prompt lookup never slower than autoregressive on any task group",
                ">= 1.00x on every group", ", ".join(f"{GROUP_LABELS.get(g, g)} {s:.2f}x" for g, s in speed),
                not slow, (f"slower on {len(slow)}/{len(speed)} groups, worst "
                           f"{GROUP_LABELS.get(worst_group, worst_group)} {worst:.2f}x (missed by {1 - worst:.2f})")
                if slow else f"all groups met, slowest {GROUP_LABELS.get(worst_group, worst_group)} {worst:.2f}x",
                "; ".join(why)))
    spec = overall.get("spec", {}).get("ours")
    if spec and spec.get("predicted_speedup"):
        measured, predicted = spec["speedup"], spec["predicted_speedup"]
        error = measured / predicted - 1
        aware = spec.get("predicted_speedup_cost_aware")
        aware_note = (f"cost-aware prediction {aware:.2f}x (measured {measured / aware - 1:+.0%} off it, verify cost "
                      f"{spec.get('verify_cost') or 0:.2f} one-token forwards)" if aware else "")
        within = abs(error) <= THM38_TOLERANCE
        targets.append(_target(
            "spec_thm38", "speculative speedup within 15% of the Theorem 3.8 prediction",
            f"measured within {THM38_TOLERANCE:.0%} of predicted",
            f"measured {measured:.2f}x vs predicted {predicted:.2f}x (alpha {spec['alpha_hat']:.2f}, c "
            f"{spec['c_hat']:.2f})", within,
            f"{error:+.0%} off the prediction" + ("" if within else
                                                 f" (missed by {abs(error) - THM38_TOLERANCE:.0%})"),
            aware_note))
    for method in methods:
        overhead = overall[method].get("record_overhead")
        if overhead is None:
            continue
        met = overhead <= RECORD_OVERHEAD_TARGET
        runs = sum(1 for s in samples if method in s["record_on"])
        targets.append(_target(
            f"record_overhead_{method}", f"recording overhead, {METHOD_NAMES[method].lower()}",
            f"<= {RECORD_OVERHEAD_TARGET:.0%} of wall time", f"{overhead:+.1%}", met,
            f"{RECORD_OVERHEAD_TARGET - overhead:.1%} to spare" if met else
            f"missed by {overhead - RECORD_OVERHEAD_TARGET:.1%}",
            f"total wall time of {runs} record=True runs against their record=False twins"))
    return targets


# -- the benchmark -----------------------------------------------------------------------------

def _base_params(params: DecodeParams | None, max_new_tokens: int) -> DecodeParams:
    base = (params or DecodeParams()).replace(max_new_tokens=max_new_tokens, mode="greedy", record=False)
    return base.replace(method="ar").validated()


def _prepare(family: Family, prompts: Sequence[BenchPrompt], limit: int | None, base: DecodeParams,
             notes: list[str]) -> list[tuple[BenchPrompt, list[int]]]:
    """Selected prompts with their token ids; prompts that do not fit the context are skipped."""
    from decoders.engine import Engine

    if limit is not None and limit < 1:
        raise DecodeError(f"limit must be an integer >= 1, got {limit}; set --limit to 1 or more")
    probe = Engine(family)
    runnable = []
    for prompt in select_prompts(prompts, limit):
        try:
            runnable.append((prompt, probe.prompt_ids(prompt.text, base)))
        except DecodeError as exc:
            notes.append(f"{prompt.name} ({prompt.category}) skipped: {exc}")
    if not runnable:
        raise DecodeError("none of the prompts fits the model's context with this token budget; "
                          "lower --max-new-tokens or use shorter prompts")
    return runnable


def _warm_up(family: Family, reference: HFReference, prompt: BenchPrompt, ids: list[int], base: DecodeParams,
             methods: Sequence[str]) -> None:
    """One short untimed pass of every decoder (Spec-Bench warms up too): first calls pay for
    allocator growth and lazy initialisation that no later run pays."""
    from decoders.engine import Engine

    engine = Engine(family)
    short = base.replace(max_new_tokens=min(8, base.max_new_tokens))
    for method in methods:
        params = short.replace(method=method)
        engine.run(prompt.text, params)
        if reference.available(method):
            reference.run(method, ids, short.max_new_tokens, gamma=params.gamma, num_pred=params.num_pred,
                          ngram_max=params.ngram_max)


def _warn_if_busy(load: list[float] | None, notes: list[str]) -> None:
    """Say so when other processes compete for the CPUs: torch's worker threads then spin
    against them, which slows every decode several-fold and unevenly."""
    import torch

    cpus = os.cpu_count() or 1
    if load and load[0] > cpus:
        notes.append(f"the machine was busy at the start (load average {load[0]:.1f} on {cpus} CPUs); timings are "
                     f"noisier than on an idle machine" + (
                         "; with other processes running, --threads 1 keeps torch's threads from spinning "
                         "against them" if torch.get_num_threads() > 1 else ""))


def _available_methods(family: Family, methods: Sequence[str], notes: list[str]) -> list[str]:
    kept = []
    for method in methods:
        if method == "spec" and family.helper is None:
            notes.append(f"speculative decoding skipped: {family.label} has no helper model "
                         "(give --helper SRC or --self-draft-layer L to include it)")
            continue
        kept.append(method)
    return kept


def _settings(family: Family, base: DecodeParams, methods: Sequence[str], limit, repeats: int,
              reference: HFReference, record_overhead_every: int) -> dict[str, Any]:
    counterparts = {}
    for method in methods:
        if not reference.available(method):
            counterparts[method] = None
        elif method == "ar":
            counterparts[method] = "generate(do_sample=False)"
        elif method == "pld":
            counterparts[method] = (f"generate(prompt_lookup_num_tokens={base.num_pred}, "
                                    f"max_matching_ngram_size={base.ngram_max})")
        else:
            how = (f"assistant_early_exit={reference.early_exit_layer}" if reference.helper_model is None
                   else "assistant_model=helper")
            counterparts[method] = (f"generate({how}, num_assistant_tokens={base.gamma}, "
                                    "num_assistant_tokens_schedule='constant', assistant_confidence_threshold=0)")
    return {
        "methods": list(methods),
        "max_new_tokens": base.max_new_tokens,
        "limit": limit,
        "repeats": repeats,
        "gamma": base.gamma,
        "num_pred": base.num_pred,
        "ngram": [base.ngram_min, base.ngram_max],
        "block": base.block,
        "jacobi_init": base.init,
        "draft_policy": getattr(base, "draft_policy", None),
        "chat_template": base.chat_template,
        "mode": "greedy",
        "decode_params": base.to_json(),
        "early_exit_layer": reference.early_exit_layer,
        "record_overhead_every": record_overhead_every,
        "transformers_counterparts": counterparts,
    }


def _family_info(family: Family) -> dict[str, Any]:
    info = dict(family.describe())
    info["backend"] = type(family.main).__name__
    info["weight_bytes"] = int(getattr(family.main, "weight_bytes", 0) or 0)
    info["n_layers"] = getattr(family.main, "n_layers", None)
    return info


def bandwidth_floor(bandwidth: dict[str, float], weight_bytes: int, ar: dict[str, Any]) -> dict[str, Any]:
    """The floor for one decode step (every weight read once) and our figures as multiples of it."""
    floor_ms = weight_bytes / (bandwidth["gb_per_s"] * 1e9) * 1000 if bandwidth["gb_per_s"] else None
    ours, theirs = ar["ours"], ar.get("theirs", {})
    return {
        "weight_bytes": weight_bytes,
        "gb_per_s": bandwidth["gb_per_s"],
        "floor_ms": _round(floor_ms),
        "ours_ms_per_token": ours["ms_per_token"],
        "ours_ms_per_token_x_floor": _round(_ratio(ours["ms_per_token"], floor_ms), 2),
        "ours_decode_step_ms": ours.get("decode_step_ms"),
        "ours_decode_step_x_floor": _round(_ratio(ours.get("decode_step_ms"), floor_ms), 2),
        "transformers_ms_per_token": theirs.get("ms_per_token"),
        "transformers_ms_per_token_x_floor": _round(_ratio(theirs.get("ms_per_token"), floor_ms), 2),
    }


def run_bench(family: Family, prompts: Sequence[BenchPrompt], methods: Sequence[str] = METHODS,
              max_new_tokens: int = 64, limit: int | None = None, repeats: int = 1,
              progress: ProgressFn | None = None, *, params: DecodeParams | None = None,
              reference: HFReference | None = None, record_overhead_every: int = 3,
              bandwidth_bytes: int = 1 << 30, warm_up: bool = True) -> dict[str, Any]:
    """Run every method on every prompt, ours and transformers' interleaved; the report dict.

    ``params`` supplies gamma, num_pred, n-gram sizes, block and init (greedy is forced).
    On every ``record_overhead_every``-th prompt (0: never) each drafting method also runs with
    ``record=True`` beside ``record=False``, to measure what recording costs; every prompt
    would double the time of the slowest methods for a figure that needs fewer samples.
    """
    started = time.perf_counter()
    say = progress or (lambda message: None)
    if not isinstance(repeats, int) or repeats < 1:
        raise DecodeError(f"repeats must be an integer >= 1, got {repeats!r}; set --repeats to 1 or more")
    base = _base_params(params, max_new_tokens)
    notes: list[str] = []
    methods = _available_methods(family, parse_methods(methods), notes)
    reference = reference or reference_for(family)
    for method in methods:
        if method != "ar" and not reference.available(method):
            notes.append(f"{METHOD_NAMES[method]} has no transformers counterpart; only our figures are shown")
    runnable = _prepare(family, prompts, limit, base, notes)
    if not isinstance(record_overhead_every, int) or record_overhead_every < 0:
        raise DecodeError(f"record_overhead_every must be an integer >= 0, got {record_overhead_every!r}")
    record_methods = [m for m in methods if m != "ar"] if record_overhead_every else []

    load_at_start = load_average()
    _warn_if_busy(load_at_start, notes)
    say("measuring memory read bandwidth")
    bandwidth = [measure_read_bandwidth(bandwidth_bytes)]
    if warm_up:
        shortest = min(runnable, key=lambda item: len(item[1]))
        say(f"warm-up on {shortest[0].name}")
        _warm_up(family, reference, shortest[0], shortest[1], base, methods)

    samples = []
    total = len(runnable) * repeats
    twins = 0
    for repeat in range(repeats):
        for index, (prompt, ids) in enumerate(runnable):
            number = repeat * len(runnable) + index + 1
            head = f"[{number}/{total}] {prompt.name} {prompt.category}" + (
                f" (repeat {repeat + 1}/{repeats})" if repeats > 1 else "")
            measurer = PromptMeasurer(family, reference, methods, base, record_methods,
                                      lambda what, head=head: say(f"{head}: {what}"))
            with_twins = bool(record_methods) and (number - 1) % record_overhead_every == 0
            samples.append(measurer.measure(prompt, ids, repeat, flip=twins % 2 == 1, record_twins=with_twins))
            twins += with_twins
    bandwidth.append(measure_read_bandwidth(bandwidth_bytes))
    best_bandwidth = max(bandwidth, key=lambda b: b["gb_per_s"])

    figures = aggregate(samples, methods)
    info = _family_info(family)
    report = {
        "schema": REPORT_SCHEMA,
        "kind": "bench",
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
        "family": info,
        "machine": {**machine_info(), "load_average_at_start": load_at_start},
        "settings": _settings(family, base, methods, limit, repeats, reference, record_overhead_every),
        "prompts": [{"question_id": p.question_id, "category": p.category, "group": p.group,
                     "prompt_tokens": len(ids)} for p, ids in runnable],
        "bandwidth": {"runs": bandwidth, "best_gb_per_s": best_bandwidth["gb_per_s"]},
        "floor": bandwidth_floor(best_bandwidth, info["weight_bytes"], figures["overall"]["ar"]),
        **figures,
        "samples": samples,
        "notes": notes,
    }
    report["targets"] = evaluate_targets(figures, methods, samples, report["floor"]["floor_ms"])
    report["elapsed_s"] = round(time.perf_counter() - started, 1)
    return report


# -- sweeps ------------------------------------------------------------------------------------

def sweep_prediction(entry: dict[str, Any], method: str, value: int) -> tuple[float | None, float | None]:
    """Theorem 3.8 (and its cost-aware form) for one run at parameter ``value``.

    Speculative runs use their own alpha_hat and c_hat. Prompt lookup and Jacobi draft at no
    model cost (c = 0) with their acceptance rate as alpha; the theorem assumes ``value`` drafts
    every iteration, which prompt lookup does only when its n-gram matches.
    """
    if method == "spec":
        return entry.get("predicted_speedup"), entry.get("predicted_speedup_cost_aware")
    alpha = entry.get("accept_rate")
    if alpha is None:
        return None, None
    cost = entry.get("verify_cost")
    return predicted_speedup(alpha, value, 0.0), cost_aware_speedup(alpha, value, 0.0, cost) if cost else None


def run_sweep(family: Family, prompts: Sequence[BenchPrompt], sweep: Sweep, max_new_tokens: int = 64,
              limit: int | None = None, repeats: int = 1, progress: ProgressFn | None = None, *,
              params: DecodeParams | None = None, warm_up: bool = True) -> dict[str, Any]:
    """Measured speedup against the Theorem 3.8 prediction for each value of one parameter."""
    from decoders.engine import Engine

    started = time.perf_counter()
    say = progress or (lambda message: None)
    if not isinstance(repeats, int) or repeats < 1:
        raise DecodeError(f"repeats must be an integer >= 1, got {repeats!r}; set --repeats to 1 or more")
    base = _base_params(params, max_new_tokens)
    if sweep.method == "spec" and family.helper is None:
        raise DecodeError(f"cannot sweep gamma: {family.label} has no helper model; "
                          "give --helper SRC or --self-draft-layer L")
    for value in sweep.values:
        base.replace(method=sweep.method, **{sweep.name: value}).validated()
    notes: list[str] = []
    runnable = _prepare(family, prompts, limit, base, notes)
    if warm_up:
        prompt, _ = min(runnable, key=lambda item: len(item[1]))
        say(f"warm-up on {prompt.name}")
        engine = Engine(family)
        short = base.replace(max_new_tokens=min(8, base.max_new_tokens))
        engine.run(prompt.text, short.replace(method=sweep.method, **{sweep.name: sweep.values[0]}))

    per_value: dict[int, list[dict]] = {v: [] for v in sweep.values}
    ar_samples: dict[int, list[dict]] = {v: [] for v in sweep.values}
    total = len(runnable) * repeats
    for repeat in range(repeats):
        for index, (prompt, _) in enumerate(runnable):
            head = f"[{repeat * len(runnable) + index + 1}/{total}] {prompt.name} {prompt.category}"
            engine = Engine(family)  # fresh: the first run decodes the AR baseline before the method
            ar = None
            # alternate the value order from prompt to prompt so that drift does not favour one end
            values = sweep.values if index % 2 == 0 else tuple(reversed(sweep.values))
            for value in values:
                say(f"{head}: {'ours ar, then ' if ar is None else ''}{sweep.method} {sweep.name}={value}")
                result = engine.run(prompt.text, base.replace(method=sweep.method, **{sweep.name: value}))
                ar = ar or baseline_entry(result)
                entry = ours_entry(result)
                entry["speedup"] = round(ar["ms_per_token"] / entry["ms_per_token"], 4)
                entry["predicted"], entry["predicted_cost_aware"] = sweep_prediction(entry, sweep.method, value)
                entry.update(question_id=prompt.question_id, group=prompt.group, repeat=repeat)
                per_value[value].append(entry)
                ar_samples[value].append(ar)

    rows = []
    for value in sweep.values:
        stats = side_stats(per_value[value], ar_samples[value])
        predicted = _mean(e["predicted"] for e in per_value[value])
        aware = _mean(e["predicted_cost_aware"] for e in per_value[value])
        measured = stats["speedup"]
        rows.append({
            "value": value,
            "measured_speedup": measured,
            "predicted_speedup": _round(predicted),
            "error": _round(_ratio(measured, predicted) - 1 if measured and predicted else None, 4),
            "predicted_cost_aware": _round(aware),
            "error_cost_aware": _round(_ratio(measured, aware) - 1 if measured and aware else None, 4),
            "tau": stats["tau"],
            "acceptance": stats.get("acceptance"),
            "alpha_hat": stats.get("alpha_hat"),
            "c_hat": stats.get("c_hat"),
            "identical": stats.get("identical"),
            "n": stats["n"],
            "ms_per_token": stats["ms_per_token"],
        })
    best = max(rows, key=lambda row: row["measured_speedup"] or 0)
    return {
        "schema": REPORT_SCHEMA,
        "kind": "sweep",
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
        "family": _family_info(family),
        "machine": machine_info(),
        "sweep": {"name": sweep.name, "method": sweep.method, "values": list(sweep.values)},
        "settings": {"max_new_tokens": base.max_new_tokens, "limit": limit, "repeats": repeats,
                     "gamma": base.gamma, "num_pred": base.num_pred, "ngram": [base.ngram_min, base.ngram_max],
                     "block": base.block, "jacobi_init": base.init,
                     "draft_policy": getattr(base, "draft_policy", None), "decode_params": base.to_json()},
        "prompts": [{"question_id": p.question_id, "category": p.category, "group": p.group,
                     "prompt_tokens": len(ids)} for p, ids in runnable],
        "ar_ms_per_token": side_stats([a for a in ar_samples[sweep.values[0]]],
                                      ar_samples[sweep.values[0]])["ms_per_token"],
        "rows": rows,
        "best_value": best["value"],
        "samples": {str(v): per_value[v] for v in sweep.values},
        "notes": notes,
        "elapsed_s": round(time.perf_counter() - started, 1),
    }
