"""The device check behind scripts/gpu_check.sh: engine checks on a device, identity runs of every
method on the bundled model, and a short bench against transformers, printed as one table.

    python scripts/device_check.py --device cuda            # the real thing (a CUDA machine)
    python scripts/device_check.py --device cpu --dry       # every part, tiny sizes, on CPU

Exit 0 when every check passed, 1 when one failed (the table says which). Never run on a GPU yet.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from decoders.backends import host  # noqa: E402
from decoders.backends.llama_fast import LlamaBackend  # noqa: E402
from decoders.core.params import DecodeParams  # noqa: E402
from decoders.engine import Engine  # noqa: E402
from decoders.models.backend_choice import make_backend  # noqa: E402
from decoders.models.families import BUILTIN_FAMILIES  # noqa: E402
from decoders.models.family import Family, load_family  # noqa: E402
from tests.support.tiny import perturbed_copy, tiny_llama_config, tiny_tokenizer  # noqa: E402

ROWS: list[tuple[str, str, str]] = []  # (section, check, result)
FAILED: list[str] = []
TINY_PROMPT = "w10 w11 w12 w13 w14 w10 w11 w12 w20 w21 w22 w10 w11 w12 w13 w30 w31 w10 w11"
IDENTITY_PROMPTS = ["Write a short poem about the sea.", "List three uses of a paperclip, one line each."]


def row(section: str, check: str, ok: bool | None, detail: str = "") -> None:
    mark = "ok" if ok else ("FAIL" if ok is False else "--")
    ROWS.append((section, check, f"{mark} {detail}".strip()))
    print(f"  {section} | {check}: {ROWS[-1][2]}", flush=True)  # progress; the table comes at the end
    if ok is False:
        FAILED.append(f"{section}: {check} {detail}")


def sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# -- 1. engine checks on the device, float32 and bfloat16 -------------------------------------------

def tiny_family(device, dtype, step_mode: str) -> Family:
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    config = tiny_llama_config(vocab=64, layers=2)
    config.initializer_range = 0.4
    main = LlamaForCausalLM(config).eval()
    helper = perturbed_copy(main, 0.05, seed=1)
    main, helper = main.to(device=device, dtype=dtype), helper.to(device=device, dtype=dtype)

    def fast(model):
        return LlamaBackend.from_hf(model, step_mode=step_mode)

    return Family(label="tiny", main=fast(main), helper=fast(helper), tokenizer=tiny_tokenizer(64),
                  stop_ids=frozenset(), device=device, dtype=dtype, main_source="tiny", helper_source="tiny+noise",
                  context_length=128, vocab_size=64, main_model=main)


def engine_checks(device, dtype, step_mode: str) -> None:
    name = f"engine {str(dtype).removeprefix('torch.')} step={step_mode}"
    family = tiny_family(device, dtype, step_mode)
    model = family.main_model
    # logits against transformers: prefill, a verify-sized forward, one-token steps
    ids = torch.randint(0, 64, (24,), generator=torch.Generator().manual_seed(3)).to(device)
    with torch.inference_mode():
        ref = model(ids[None]).logits[0].float()
    backend = (make_backend(model, cuda_graph="off") if step_mode == "off"
               else LlamaBackend.from_hf(model, step_mode=step_mode))
    got = [backend.forward(ids[:10], 10), backend.forward(ids[10:14], 4)]
    got += [backend.forward(ids[i:i + 1], 1) for i in range(14, 24)]
    err = (torch.cat(got) - ref).abs().max().item()
    scale = ref.abs().max().item()
    tol = 1e-4 * scale if dtype == torch.float32 else 0.05 * scale
    row(name, "logits vs transformers", err <= tol, f"max |diff| {err:.2e} (tol {tol:.1e})")
    # every method, greedy: the baseline's tokens exactly; one host transfer per iteration
    engine = Engine(family)
    for params in (DecodeParams(method="spec", gamma=4), DecodeParams(method="pld", num_pred=5),
                   DecodeParams(method="pld", branches=3), DecodeParams(method="jacobi", block=4),
                   DecodeParams(method="lookahead")):
        host.TRANSFERS.reset()
        syncs = count_syncs(device)
        with syncs:
            result = engine.run(TINY_PROMPT, params.replace(max_new_tokens=24))
        label = params.method + (f" B={params.branches}" if params.branches > 1 else "")
        row(name, f"{label} identical to AR", result.method.ids == result.baseline.ids,
            f"{len(result.method.ids)} tokens")
        per_iter = syncs.count / max(1, len(result.method.iters) + len(result.baseline.iters))
        if syncs.available:
            row(name, f"{label} host syncs / iteration", per_iter <= 1.5, f"{per_iter:.2f} (cuda sync debug)")
    sampling = DecodeParams(method="spec", mode="sampling", temperature=0.9, seed=4, max_new_tokens=24)
    a, b = (engine.run(TINY_PROMPT, sampling).method.ids for _ in range(2))
    row(name, "spec sampling reproducible by seed", a == b)


class count_syncs:
    """Counts synchronising CUDA calls with torch's sync debug mode (CUDA only)."""

    def __init__(self, device):
        self.available = device.type == "cuda" and hasattr(torch.cuda, "set_sync_debug_mode")
        self.count = 0

    def __enter__(self):
        if self.available:
            self._catch = warnings.catch_warnings(record=True)
            self._seen = self._catch.__enter__()
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
        return self

    def __exit__(self, *exc):
        if self.available:
            torch.cuda.set_sync_debug_mode("default")
            self.count = sum("synchroniz" in str(w.message).lower() for w in self._seen)
            self._catch.__exit__(*exc)


# -- 2. identity runs on the bundled model ------------------------------------------------------------

def bundled(device: str, dtype: str, **changes) -> Family:
    spec = replace(BUILTIN_FAMILIES["smollm2-135m"], device=device, dtype=dtype, **changes)
    return load_family(spec)


def identity_runs(engine: Engine, tokens: int, prompts: list[str]) -> None:
    family = engine.family
    name = f"identity {family.describe().dtype} ({family.helper_source})"
    for method in ("spec", "pld", "jacobi", "lookahead"):
        for prompt in prompts:
            result = engine.run(prompt, DecodeParams(method=method, max_new_tokens=tokens))
            s = result.summary
            if s.identical:
                row(name, method, True, f"{len(result.method.ids)} tokens")
            else:  # a near-tie broken another way by a wider forward is rounding, not a bug
                margin = (s.divergence or {}).get("margin")
                row(name, method, margin is not None and margin < 0.1,
                    f"diverged at {s.first_divergence}, top-2 margin {margin}")


# -- 3. the bench: ours against transformers generate() ----------------------------------------------

def bench_prompts(limit: int) -> list[str]:
    lines = (REPO / "bench" / "spec_bench_dev.jsonl").read_text().splitlines()
    return [json.loads(line)["turns"][0] for line in lines[:limit]]


def hf_generate_ms(family: Family, prompt: str, tokens: int) -> tuple[float, int]:
    from transformers import GenerationConfig

    model = family.main_model
    ids = torch.tensor([family.encode_prompt(prompt, True)], device=family.device)
    config = GenerationConfig(do_sample=False, max_new_tokens=tokens, min_new_tokens=tokens, use_cache=True,
                              pad_token_id=0)
    with torch.inference_mode():
        sync(family.device)
        t0 = time.perf_counter()
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=config)
        sync(family.device)
    return 1000 * (time.perf_counter() - t0), out.shape[1] - ids.shape[1]


def bench(engines: dict[str, Engine], graph: str, tokens: int, prompts: list[str], hf: float) -> None:
    """Ours (AR, spec with each self-draft, PLD, Jacobi) in ms/token against transformers, each on
    the engine of its draft's family (one per family: T(k) and the draft policy measured once)."""
    configs = [("ar", "early-exit", DecodeParams(method="ar")),
               ("spec early-exit", "early-exit", DecodeParams(method="spec", gamma=4)),
               ("spec int4", "int4", DecodeParams(method="spec", gamma=4)),
               ("pld", "early-exit", DecodeParams(method="pld")),
               ("jacobi", "early-exit", DecodeParams(method="jacobi"))]
    for label, draft, params in configs:
        engine = engines.get(draft)
        if engine is None:
            row("bench", f"{label} graph={graph}", None, f"skipped: no {draft} family")
            continue
        per_token, identical = [], True
        for prompt in prompts:
            result = engine.run(prompt, params.replace(max_new_tokens=tokens))
            run = result.method
            per_token.append(run.time_ms["wall"] / max(1, len(run.ids)))
            identical &= result.summary.identical
        ours = statistics.fmean(per_token)
        row("bench", f"{label} graph={graph}", True,
            f"{ours:.2f} ms/token ({hf / ours:.2f}x transformers){'' if identical else ', not identical'}")


def transformers_ms_per_token(family: Family, tokens: int, prompts: list[str]) -> float:
    per_token = []
    for prompt in prompts:
        hf_generate_ms(family, prompt, 4)  # warm
        ms, n = hf_generate_ms(family, prompt, tokens)
        per_token.append(ms / max(n, 1))
    hf = statistics.fmean(per_token)
    row("bench", "transformers generate() greedy", True, f"{hf:.2f} ms/token (1.00x)")
    return hf


def load_families(device: str, graph: str, draft_layer: int) -> dict:
    """The bundled model (auto dtype) loaded once, with an early-exit draft and with an int4 draft
    built from the same main model (as the app switches drafts)."""
    out = {}
    from decoders.models.drafts import EarlyExit, Int4

    try:
        out["early-exit"] = bundled(device, "auto", cuda_graph=graph, draft=EarlyExit(layer=draft_layer))
    except Exception as err:
        row("load", f"bundled, early-exit draft, graph={graph}", None, f"skipped: {str(err).splitlines()[0][:80]}")
        return out
    try:
        out["int4"] = with_draft(out["early-exit"], Int4())
    except Exception as err:  # e.g. no int4 kernel on this device
        row("load", f"bundled, int4 draft, graph={graph}", None, f"skipped: {str(err).splitlines()[0][:80]}")
    return out


def with_draft(family: Family, draft) -> Family:
    """``family`` drafting with ``draft`` instead, built from its main model as a load builds it."""
    from decoders.models.drafts import DraftTarget, build_draft, source_of

    helper = build_draft(draft, DraftTarget.of(family), warm=True)
    return replace(family, helper=helper, draft=draft, helper_source=source_of(draft, helper))


def print_table() -> None:
    width = max(len(f"{s} | {c}") for s, c, _ in ROWS) + 2
    print(f"{'check'.ljust(width)}result")
    print("-" * (width + 40))
    for section, check, result in ROWS:
        print(f"{f'{section} | {check}'.ljust(width)}{result}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu", "mps"])
    parser.add_argument("--dry", action="store_true", help="tiny sizes: prove every part runs (CPU)")
    parser.add_argument("--skip", default="", help="comma list of parts to skip: engine,identity,bench")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    skip = set(filter(None, args.skip.split(",")))
    ROWS.clear()
    FAILED.clear()
    t0 = time.perf_counter()
    dtypes = [torch.float32, torch.bfloat16]
    step_modes = ["off", "graph"] if device.type == "cuda" else ["off", "eager"]
    if "engine" not in skip:
        for dtype in dtypes:
            for step_mode in step_modes:
                engine_checks(device, dtype, step_mode)
    tokens, prompts = (8, bench_prompts(1)) if args.dry else (64, bench_prompts(6))
    graphs = ["on", "off"] if device.type == "cuda" else ["off"]
    hf = None
    for graph in graphs:
        families = load_families(args.device, graph, draft_layer=8)
        engines = {name: Engine(family) for name, family in families.items()}
        if "identity" not in skip and graph == graphs[0]:
            for engine in engines.values():
                identity_runs(engine, 8 if args.dry else 48, IDENTITY_PROMPTS[:1] if args.dry else IDENTITY_PROMPTS)
        if "bench" not in skip and families:
            if hf is None:
                hf = transformers_ms_per_token(next(iter(families.values())), tokens, prompts)
            bench(engines, graph, tokens, prompts, hf)
        families.clear()
        engines.clear()
    print_table()
    print(f"\n{len(ROWS)} checks, {len(FAILED)} failed, {time.perf_counter() - t0:.0f} s on {device}"
          + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""))
    return 1 if FAILED else 0


if __name__ == "__main__":
    raise SystemExit(main())
