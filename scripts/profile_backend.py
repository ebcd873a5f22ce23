"""Side-by-side speed of transformers and `LlamaBackend` on the bundled SmolLM2 model.

Measured interleaved (one of each per round, medians reported) so that load from other
processes hits all of them alike:

  (a) HF forward, one token, DynamicCache (`HFBackend`)
  (b) transformers `generate()` greedy, ms per new token (prefill included)
  (c) `LlamaBackend` forward, one token
  (d) our own greedy loop on `LlamaBackend`, ms per new token (prefill included)

plus the cost of verify steps of 2, 3, 5, 8, 11 tokens relative to a 1-token step on both
backends, and checks that (b) and (d) produce the same tokens.

On a machine shared with other work use ``--wait-idle 0.9``: each measurement then starts
only once the CPUs are idle, otherwise contention swamps the differences.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from decoders.backend import HFBackend  # noqa: E402
from decoders.llama_fast import LlamaBackend  # noqa: E402

PROMPT = "Explain in a few sentences why the sky is blue and why sunsets are red."
VERIFY_SIZES = (1, 2, 3, 5, 8, 11)


def load():
    """The bundled model (float32, CPU) as a transformers model + tokenizer, via `load_family`."""
    from dataclasses import replace

    from decoders.families import BUILTIN_FAMILIES, DEFAULT_FAMILY
    from decoders.family import load_family

    spec = replace(BUILTIN_FAMILIES[DEFAULT_FAMILY], device="cpu", dtype="float32")
    family = load_family(spec, fast=False)
    return family.main_model.eval(), family.tokenizer


def prompt_ids(tokenizer) -> torch.Tensor:
    messages = [{"role": "user", "content": PROMPT}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return torch.tensor(tokenizer(text)["input_ids"])


def idle_fraction(seconds: float = 0.3) -> float:
    """Share of all CPUs idle over ``seconds`` (Linux /proc/stat; 1.0 where unavailable)."""
    def read():
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
        return values[3] + values[4], sum(values)

    try:
        idle0, total0 = read()
        time.sleep(seconds)
        idle1, total1 = read()
    except OSError:
        return 1.0
    return (idle1 - idle0) / max(1, total1 - total0)


def wait_for_idle(threshold: float, limit: float = 600.0) -> None:
    """On a shared machine, start a round only once other processes leave the CPUs alone."""
    deadline = time.monotonic() + limit
    while threshold > 0 and time.monotonic() < deadline and idle_fraction() < threshold:
        pass


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def step_time(backend, prompt: torch.Tensor, n: int, reps: int = 3) -> float:
    """Median seconds of a forward of ``n`` tokens after ``prompt`` (cache cropped back each time)."""
    backend.reset()
    backend.forward(prompt, 1)
    ids = prompt[-n:].clone() if n <= len(prompt) else prompt[:1].repeat(n)
    times = []
    for _ in range(reps):
        backend.crop(len(prompt))
        times.append(timed(lambda: backend.forward(ids, n)))
    return statistics.median(times)


def hf_generate(model, prompt: torch.Tensor, new: int) -> list[int]:
    with torch.inference_mode():
        out = model.generate(
            prompt[None], max_new_tokens=new, min_new_tokens=new, do_sample=False, attention_mask=torch.ones_like(prompt)[None]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--new", type=int, default=64, help="tokens per generate run")
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave)")
    parser.add_argument("--plain", action="store_true", help="no oneDNN-packed weights for multi-token steps")
    parser.add_argument("--wait-idle", type=float, default=0.0, metavar="FRACTION",
                        help="before each round wait until this share of the CPUs is idle (shared machines), e.g. 0.9")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    t0 = time.perf_counter()
    model, tokenizer = load()
    print(f"model loaded in {time.perf_counter() - t0:.1f} s; threads {torch.get_num_threads()}")
    t0 = time.perf_counter()
    fast = LlamaBackend.from_hf(model, packed_multi_token=not args.plain)
    print(f"LlamaBackend built in {time.perf_counter() - t0:.2f} s, {fast.weight_bytes / 1e6:.0f} MB of weights per step")
    hf = HFBackend(model)
    prompt = prompt_ids(tokenizer)
    print(f"prompt {len(prompt)} tokens, {args.new} new tokens per generate")

    ref = hf_generate(model, prompt, args.new)
    ours = our_generate(fast, prompt, args.new)
    same = next((i for i, (a, b) in enumerate(zip(ref, ours)) if a != b), None)
    print("greedy tokens identical" if same is None else f"greedy tokens FIRST DIFFER at {same}")
    with torch.inference_mode():
        full = model(torch.tensor([prompt.tolist() + ref])).logits[0].float()
    fast.reset()
    mine = fast.forward(torch.tensor(prompt.tolist() + ref), len(prompt) + len(ref))
    print(f"logits max |diff| vs HF full forward ({len(prompt) + len(ref)} positions): {(mine - full).abs().max():.2e}")

    samples: dict[str, list[float]] = {}

    def add(name, seconds):
        samples.setdefault(name, []).append(seconds * 1e3)

    for _ in range(args.rounds):
        for n in VERIFY_SIZES:
            wait_for_idle(args.wait_idle)
            add(f"hf_step{n}", step_time(hf, prompt, n))
            add(f"fast_step{n}", step_time(fast, prompt, n))
        wait_for_idle(args.wait_idle)
        add("hf_generate", timed(lambda: hf_generate(model, prompt, args.new)) / args.new)
        add("fast_generate", timed(lambda: our_generate(fast, prompt, args.new)) / args.new)

    med = {k: statistics.median(v) for k, v in samples.items()}
    print(f"\nmedians over {args.rounds} interleaved rounds (ms)")
    print(f"(a) HF forward 1 token, DynamicCache : {med['hf_step1']:7.2f}")
    print(f"(b) HF generate() greedy, per token  : {med['hf_generate']:7.2f}")
    print(f"(c) LlamaBackend forward 1 token     : {med['fast_step1']:7.2f}")
    print(f"(d) LlamaBackend greedy loop, per tok: {med['fast_generate']:7.2f}")
    print(f"ratio (c)/(b) = {med['fast_step1'] / med['hf_generate']:.3f}   (d)/(b) = {med['fast_generate'] / med['hf_generate']:.3f}"
          f"   (c)/(a) = {med['fast_step1'] / med['hf_step1']:.3f}")
    print("\nverify step cost relative to a 1-token step")
    print("tokens   HF ms  HF x   fast ms  fast x")
    for n in VERIFY_SIZES:
        h, f = med[f"hf_step{n}"], med[f"fast_step{n}"]
        print(f"{n:6d} {h:7.2f} {h / med['hf_step1']:5.2f}  {f:7.2f} {f / med['fast_step1']:6.2f}")
    print(f"\nbandwidth floor at 26 GB/s: {fast.weight_bytes / 26e9 * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
