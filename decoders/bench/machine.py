"""The machine a benchmark runs on: memory read bandwidth, load from other processes, and the
bandwidth floor that says how far one decode step is from what the hardware allows."""

from __future__ import annotations

import os
import platform
import time
from typing import TYPE_CHECKING

import msgspec
from msgspec import UNSET, UnsetType

from decoders.bench.common import ratio, rounded
from decoders.records.codec import Record
from decoders.records.family_info import FamilyInfo

if TYPE_CHECKING:
    from decoders.models.family import Family


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


class CostCurve(Record, kw_only=True):
    """The verify-cost curve T(k) of one backend, measured once in the run (`verify_cost_curve`)."""

    context: int  # the tokens in the cache before each forward (the median prompt's)
    t: list[float]  # T(k), k = 1..16: a k-token forward over a one-token forward; empty: the context had no room


class MachineInfo(Record, kw_only=True):
    """The machine and the versions a run measured on (`machine_info`), as a sweep's report.json
    holds them under ``machine``; a bench's (`BenchMachine`) adds what its run measured."""

    platform: str  # `platform.platform()`: "Linux-6.1-x86_64-with-glibc2.36"
    processor: str  # the processor's name, else the machine type ("x86_64")
    cpus: int | None  # `os.cpu_count()`; None where it is unknown
    torch_threads: int  # the threads torch decoded with
    torch: str  # torch's version
    transformers: str  # transformers' version
    python: str  # Python's version
    load_average: list[float] | None  # 1/5/15-minute load average at the end; None where unknown


class BenchMachine(MachineInfo, kw_only=True):
    """The machine a bench ran on, as report.json's ``machine`` holds it (`machine_info` and what
    the run adds). The fields are in report.json's key order."""

    load_average_at_start: list[float] | None  # the same before the first prompt
    # the main (first) backend's T(k); UNSET in reports from before it was measured
    verify_cost_curve: CostCurve | UnsetType = UNSET
    # a run on several backends only: llama-cpp-python's version (None: not installed)
    llama_cpp_python: str | None | UnsetType = UNSET

    @classmethod
    def of(cls, info: MachineInfo, load_average_at_start: list[float] | None, verify_cost_curve: CostCurve,
           llama_cpp_python: str | None | UnsetType = UNSET) -> BenchMachine:
        """``info`` with what the bench's run measured besides."""
        return cls(**msgspec.structs.asdict(info), load_average_at_start=load_average_at_start,
                   verify_cost_curve=verify_cost_curve, llama_cpp_python=llama_cpp_python)


class BatchMachine(Record, kw_only=True):
    """The machine a batch bench ran on, as its report.json holds it under ``machine`` (what
    ``tui-decode bench --batch`` measured; each key UNSET where the caller of `run_batch_bench` gave
    no machine). The fields are in report.json's key order."""

    cpu: str | UnsetType = UNSET  # the processor's model name (`decoders.models.machine.cpu_features`)
    vector: str | UnsetType = UNSET  # its vector features ("avx2 avx512f"), as `cpu_features` names them
    cpus: int | None | UnsetType = UNSET  # `os.cpu_count()`; None where it is unknown
    threads: int | UnsetType = UNSET  # the threads torch decoded with
    load_before: list[float] | None | UnsetType = UNSET  # 1/5/15-minute load average before the model loaded
    load_after: list[float] | None | UnsetType = UNSET  # the same after the last batch


def machine_info() -> MachineInfo:
    import torch
    import transformers

    return MachineInfo(
        platform=platform.platform(), processor=platform.processor() or platform.machine(), cpus=os.cpu_count(),
        torch_threads=torch.get_num_threads(),
        torch=str(torch.__version__),  # a TorchVersion, a str subclass that msgspec does not encode
        transformers=transformers.__version__, python=platform.python_version(), load_average=load_average())


def load_average() -> list[float] | None:
    """1/5/15-minute load average: other processes on the machine skew every timing."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def busy_note(load: list[float] | None) -> str | None:
    """A note when other processes compete for the CPUs: torch's worker threads then spin
    against them, which slows every decode several-fold and unevenly."""
    import torch

    cpus = os.cpu_count() or 1
    if not (load and load[0] > cpus):
        return None
    return (f"the machine was busy at the start (load average {load[0]:.1f} on {cpus} CPUs); timings are "
            f"noisier than on an idle machine" + (
                "; with other processes running, --threads 1 keeps torch's threads from spinning "
                "against them" if torch.get_num_threads() > 1 else ""))


def family_info(family: Family) -> FamilyInfo:
    """The model family as the report describes it, with its backend's class and weight bytes."""
    return msgspec.structs.replace(family.describe(), backend=type(family.main).__name__,
                                   weight_bytes=int(family.main.weight_bytes or 0), n_layers=family.main.n_layers)


class Floor(Record, kw_only=True):
    """The floor for one decode step (every weight read once) and our figures as multiples of it
    (a figure a report leaves out reads as None)."""

    weight_bytes: int
    gb_per_s: float
    floor_ms: float | None = None
    ours_ms_per_token: float | None = None
    ours_ms_per_token_x_floor: float | None = None
    ours_decode_step_ms: float | None = None
    ours_decode_step_x_floor: float | None = None
    transformers_ms_per_token: float | None = None
    transformers_ms_per_token_x_floor: float | None = None


def bandwidth_floor(bandwidth: dict[str, float], weight_bytes: int, ours_ms_per_token: float | None,
                    ours_decode_step_ms: float | None, theirs_ms_per_token: float | None) -> Floor:
    """The floor at the measured ``bandwidth`` for ``weight_bytes`` of weights, against our and
    transformers' autoregressive figures."""
    floor_ms = weight_bytes / (bandwidth["gb_per_s"] * 1e9) * 1000 if bandwidth["gb_per_s"] else None
    return Floor(
        weight_bytes=weight_bytes,
        gb_per_s=bandwidth["gb_per_s"],
        floor_ms=rounded(floor_ms),
        ours_ms_per_token=ours_ms_per_token,
        ours_ms_per_token_x_floor=rounded(ratio(ours_ms_per_token, floor_ms), 2),
        ours_decode_step_ms=ours_decode_step_ms,
        ours_decode_step_x_floor=rounded(ratio(ours_decode_step_ms, floor_ms), 2),
        transformers_ms_per_token=theirs_ms_per_token,
        transformers_ms_per_token_x_floor=rounded(ratio(theirs_ms_per_token, floor_ms), 2),
    )


def verify_cost_curve(family: Family, ids: list[int], repeats: int = 3) -> CostCurve:
    """T(k) for k = 1..16 of the family's main backend after ``ids`` (a prompt's context): a
    k-token forward, every row of logits kept as a verify keeps them, over a one-token forward
    (`decoders.analysis.timing.measure_cost_curve`, medians of ``repeats`` interleaved passes).
    ``t`` is empty when the context has no room."""
    from decoders.analysis.timing import CURVE_WIDTHS, measure_cost_curve
    from decoders.backends.runner import KVRunner

    seq = list(ids)
    if not seq or len(seq) + CURVE_WIDTHS > family.context_length:
        return CostCurve(context=len(seq), t=[])
    runner = KVRunner(family.main)
    runner.run(seq)  # the context in the cache: every forward of the curve starts at its end
    curve = measure_cost_curve(runner, seq, repeats=repeats)
    runner.reset()
    return CostCurve(context=len(seq), t=curve)
