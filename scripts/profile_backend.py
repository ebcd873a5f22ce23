"""Where a `LlamaBackend` forward spends its time on the bundled SmolLM2 model, and how far it is
from the memory floor.

One run, measurements interleaved (a round visits every thread count and every width, so load
from other processes hits all of them alike; medians over the rounds):

  * the read-bandwidth floor measured in this run: the best time to sum a touched float32
    buffer of the backend's weight bytes, per thread count, and the one-token step as a
    multiple of it;
  * T(k), k = 1..16: a k-token forward (all k rows of logits kept, as a verify of k - 1
    drafts keeps them) after the prompt, over the one-token forward;
  * per-part breakdown at M = 1, 2, 5, 8, 11, 16 rows, on plain addmm weights and on the
    oneDNN-packed copy (`*` marks the layout `LlamaBackend.forward` uses at that M): the
    projections (qkv, o, gate_up, down), attention (cache write + SDPA), norms, rotary,
    SiLU*up, the LM head and the rest (Python, embedding, mask: the forward's wall time less
    the parts) - timed on the same code path (`profile_parts.timed_forward`, checked to give
    the backend's logits bit for bit);
  * all of it for each of ``--threads`` (default 1,2), side by side.

Also checks that our greedy loop produces transformers' tokens; ``--hf`` adds transformers'
own step and generate() timings.

On a machine shared with other work use ``--wait-idle 0.9``: each measurement then starts
only once the CPUs are idle (at most 20 s of waiting each), otherwise contention swamps
the differences.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from decoders.backends.hf import HFBackend  # noqa: E402
from decoders.backends.llama_fast import LlamaBackend  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from profile_parts import (  # noqa: E402
    PARTS,
    VARIANTS,
    Floor,
    add_variants,
    breakdown_ms,
    check_timed_forward,
    chosen_layout,
    forward_ms,
    layouts,
    load_average,
    prefill,
    threads,
    timed,
    wait_for_idle,
)

PROMPT = "Explain in a few sentences why the sky is blue and why sunsets are red."
WIDTHS = range(1, 17)  # T(k), k = 1..16
BREAKDOWN_ROWS = (1, 2, 5, 8, 11, 16)
HF_SIZES = (1, 2, 5, 8, 11)


def load():
    """The bundled model (float32, CPU) as a transformers model + tokenizer, via `load_family`."""
    from dataclasses import replace

    from decoders.models.families import BUILTIN_FAMILIES, DEFAULT_FAMILY
    from decoders.models.family import load_family

    spec = replace(BUILTIN_FAMILIES[DEFAULT_FAMILY], device="cpu", dtype="float32")
    family = load_family(spec, fast=False)
    return family.main_model.eval(), family.tokenizer


def prompt_ids(tokenizer) -> torch.Tensor:
    messages = [{"role": "user", "content": PROMPT}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return torch.tensor(tokenizer(text)["input_ids"])


def hf_generate(model, prompt: torch.Tensor, new: int) -> list[int]:
    with torch.inference_mode():
        out = model.generate(
            prompt[None], max_new_tokens=new, min_new_tokens=new, do_sample=False,
            attention_mask=torch.ones_like(prompt)[None],
        )
    return out[0, len(prompt) :].tolist()


def our_generate(backend, prompt: torch.Tensor, new: int) -> list[int]:
    backend.reset()
    tokens = []
    ids = prompt
    for _ in range(new):
        token = int(backend.forward(ids, 1)[0].argmax())
        tokens.append(token)
        ids = torch.tensor([token])
    return tokens


def check_identity(model, fast, prompt: torch.Tensor, new: int) -> list[int]:
    """Our greedy tokens against transformers' generate(), and our logits against a full HF forward."""
    ref = hf_generate(model, prompt, new)
    ours = our_generate(fast, prompt, new)
    same = next((i for i, (a, b) in enumerate(zip(ref, ours, strict=False)) if a != b), None)
    print("greedy tokens identical to transformers generate()" if same is None
          else f"greedy tokens FIRST DIFFER at {same}")
    with torch.inference_mode():
        full = model(torch.tensor([prompt.tolist() + ref])).logits[0].float()
    fast.reset()
    mine = fast.forward(torch.tensor(prompt.tolist() + ref), len(prompt) + len(ref))
    print(f"logits max |diff| vs HF full forward ({len(prompt) + len(ref)} positions): {(mine - full).abs().max():.2e}")
    return ref


def parse_threads(text: str) -> list[int]:
    try:
        counts = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        counts = []
    if not counts or any(c < 1 or c > 256 for c in counts):
        raise SystemExit("--threads takes thread counts in 1..256, e.g. 1,2")
    return counts


def measure(args, fast, prompt, counts, samples, hf=None) -> None:
    """One round of everything, for every thread count; samples[(threads, name)] gets ms."""
    def add(count, name, ms):
        samples.setdefault((count, name), []).append(ms)

    for count in counts:
        with threads(count):
            wait_for_idle(args.wait_idle)
            add(count, "floor", args.floor.read_ms())
            prefill(fast, prompt)
            for k in WIDTHS:
                add(count, f"T{k}", forward_ms(fast, prompt, k))
            for m in BREAKDOWN_ROWS:
                for layout in layouts(fast):
                    for part, ms in breakdown_ms(fast, prompt, m, layout).items():
                        add(count, f"{layout}{m}:{part}", ms)
            if hf is not None:
                model, hf_backend = hf
                for n in HF_SIZES:
                    prefill(hf_backend, prompt)
                    add(count, f"hf{n}", forward_ms(hf_backend, prompt, n))
                generate = timed(lambda model=model: hf_generate(model, prompt, args.new))
                add(count, "hf_generate", generate / args.new * 1e3)
                add(count, "fast_generate", timed(lambda: our_generate(fast, prompt, args.new)) / args.new * 1e3)


def print_report(med, counts, fast, nbytes: int, prompt_len: int, hf: bool) -> None:
    weight_bytes = fast.weight_bytes
    print(f"\n== memory floor: {weight_bytes / 1e6:.1f} MB of weights per forward "
          f"(read: sum of a touched {nbytes / 1e6:.0f} MB float32 buffer, best of 5 per round)")
    for c in counts:
        floor, one = med[(c, "floor")], med[(c, "T1")]
        print(f"threads {c}: floor {floor:6.1f} ms ({nbytes / floor / 1e6:5.1f} GB/s); one-token step "
              f"{one:6.1f} ms = {one / floor:.2f}x the floor")

    print(f"\n== T(k): a k-token forward (k rows of logits) after {prompt_len} prompt tokens, over the one-token step")
    print("   k" + "".join(f"  {c} thr ms    T(k)" for c in counts))
    for k in WIDTHS:
        print(f"{k:4d}" + "".join(f"  {med[(c, f'T{k}')]:9.2f} {med[(c, f'T{k}')] / med[(c, 'T1')]:7.2f}"
                                  for c in counts))

    for c in counts:
        print(f"\n== breakdown, threads {c} (ms per forward; * = the layout LlamaBackend uses at that M; "
              "proj = qkv + o + gate_up + down; attn = cache write + SDPA; other = wall - parts)")
        cols = ("proj",) + PARTS + ("total",)
        print("  M layout    " + "".join(f"{name:>8}" for name in cols) + "   x M=1")
        base = med[(c, "plain1:total")]
        for m in BREAKDOWN_ROWS:
            for layout in layouts(fast):
                get = lambda part, c=c, layout=layout, m=m: med[(c, f"{layout}{m}:{part}")]  # noqa: E731
                proj = sum(get(p) for p in ("qkv", "o", "gate_up", "down"))
                mark = "*" if layout == chosen_layout(fast, m) else " "
                print(f"{m:3d} {layout[:9]:9}{mark}" + f"{proj:8.2f}"
                      + "".join(f"{get(p):8.2f}" for p in PARTS + ("total",))
                      + f"   {get('total') / base:5.2f}")

    if hf:
        print("\n== transformers (HFBackend, DynamicCache) beside ours, ms")
        for c in counts:
            print(f"threads {c}: generate() {med[(c, 'hf_generate')]:.2f} ms/token, our greedy loop "
                  f"{med[(c, 'fast_generate')]:.2f} ms/token; verify widths "
                  + ", ".join(f"{n}: HF {med[(c, f'hf{n}')] / med[(c, 'hf1')]:.2f} ours "
                              f"{med[(c, f'T{n}')] / med[(c, 'T1')]:.2f}" for n in HF_SIZES))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", default="1,2",
                        help="comma-separated thread counts, measured side by side (default 1,2)")
    parser.add_argument("--new", type=int, default=64,
                        help="tokens of the greedy identity check (and --hf generate runs)")
    parser.add_argument("--plain", action="store_true", help="no oneDNN-packed weights for multi-token steps")
    parser.add_argument("--dtype", choices=("float32", "float16"), default="float32",
                        help="float16: float16 weights through fbgemm (decoders.backends.fp16_cpu; its layout shows "
                             "as plain, the floor reads its half-size weight bytes, transformers stays float32)")
    parser.add_argument("--variants", default="", help=f"candidate layouts to break down beside the backend's, "
                        f"comma-separated: {', '.join(VARIANTS)} (each packs one more weight copy)")
    parser.add_argument("--hf", action="store_true", help="also time transformers' forward and generate()")
    parser.add_argument("--wait-idle", type=float, default=0.0, metavar="FRACTION",
                        help="before each measurement wait until this share of the CPUs is idle (shared machines), "
                             "e.g. 0.9")
    args = parser.parse_args()
    counts = parse_threads(args.threads)
    variants = [v for v in args.variants.split(",") if v]
    if any(v not in VARIANTS for v in variants):
        raise SystemExit(f"--variants takes names from {', '.join(VARIANTS)}")
    if variants and args.dtype == "float16":
        raise SystemExit("--variants repack the float32 matrices, which a float16 backend no longer holds; drop one")
    if not 1 <= args.rounds <= 50:
        raise SystemExit("--rounds takes 1..50")

    started = time.perf_counter()
    print(f"load average at start: {load_average()}")
    load_at_start = os.getloadavg()[0]
    model, tokenizer = load()
    print(f"model loaded in {time.perf_counter() - started:.1f} s")
    t0 = time.perf_counter()
    if args.dtype == "float16":
        from decoders.backends.fp16_cpu import Fp16LlamaBackend

        fast = Fp16LlamaBackend.from_hf(model)
    else:
        fast = LlamaBackend.from_hf(model, packed_multi_token=not args.plain)
    print(f"{type(fast).__name__} built in {time.perf_counter() - t0:.2f} s, "
          f"{fast.weight_bytes / 1e6:.0f} MB of weights per step")
    prompt = prompt_ids(tokenizer)
    print(f"prompt {len(prompt)} tokens; threads {counts}; {args.rounds} rounds")
    check_identity(model, fast, prompt, args.new)
    check_timed_forward(fast, prompt, BREAKDOWN_ROWS)
    print("timed forward gives the backend's logits bit for bit at M = " + ", ".join(map(str, BREAKDOWN_ROWS)))
    add_variants(fast, variants)
    args.floor = Floor(fast.weight_bytes)
    hf = (model, HFBackend(model)) if args.hf else None

    samples: dict = {}
    for _ in range(args.rounds):
        measure(args, fast, prompt, counts, samples, hf)
    med = {key: statistics.median(v) for key, v in samples.items()}
    print_report(med, counts, fast, args.floor.nbytes, len(prompt), hf is not None)
    print(f"\nload average at end: {load_average()}; {time.perf_counter() - started:.0f} s in all")
    busy = max(os.getloadavg()[0], load_at_start) > (os.cpu_count() or 1)
    if busy:
        print("the load average passed the CPU count: other processes competed for the CPUs, and torch's threads "
              "spin against them (the figures with more threads than idle CPUs are contention, not the backend)")


if __name__ == "__main__":
    main()
