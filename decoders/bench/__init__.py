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

Modules, one per concern:

* `prompts`   - Spec-Bench JSONL files, task groups, round-robin selection;
* `inputs`    - what a run starts from: methods and parameters checked, prompts tokenized;
* `machine`   - memory read bandwidth, load average, the bandwidth floor;
* `reference` - transformers' `generate()` counterparts (only the benchmark imports it);
* `llamacpp_reference` - llama-cpp-python's own loop, the llama.cpp backend's counterparts;
* `measure`   - one prompt, ours beside transformers', into typed entries;
* `entries`   - those entries as report.json holds them (`OursEntry`, `TheirsEntry`, `Sample`);
* `aggregate` - entries pooled per method, overall and per task group;
* `targets`   - the benchmark's targets judged from those figures;
* `variants`  - rows that vary a method ("spec[int4]", "pld[branches 3]"): their syntax and labels;
* `drafts`    - each row resolved against the family: its draft (built once per run), its counterpart;
* `lanes`     - the one shape of a run: each backend a lane, every row on every prompt on each;
* `settings`  - what a run was asked to do, as report.json's settings hold it (`BenchSettings`);
* `suite`     - the whole benchmark on one backend (one lane) into a `BenchReport`;
* `multi`     - the same model on several backends in one run (`--backends torch,llamacpp`);
* `sweep`     - one parameter swept against Theorem 3.8 into a `SweepReport`;
* `files`     - report.json read back (`load_report`), every field checked by the report's declared type;
* `cells`, `tables` - the report's cells and tables, as report.md and the command line print them;
* `report`    - report.md and report.json (`to_json()` of either report, a msgspec Struct).

Importing this package does not import torch or transformers; running a benchmark does.
"""

from decoders.bench.inputs import parse_methods
from decoders.bench.prompts import GROUP_LABELS, TASK_GROUPS, BenchPrompt, load_prompts, select_prompts, task_group
from decoders.bench.suite import REPORT_SCHEMA, BenchReport, run_bench
from decoders.bench.sweep import Sweep, SweepReport, parse_sweep, run_sweep, sweepable
from decoders.bench.variants import Variant, parse_variants

__all__ = [
    "GROUP_LABELS", "TASK_GROUPS", "BenchPrompt", "load_prompts", "select_prompts", "task_group",
    "REPORT_SCHEMA", "BenchReport", "parse_methods", "run_bench",
    "Sweep", "SweepReport", "parse_sweep", "run_sweep", "sweepable", "Variant", "parse_variants",
]
