"""Suffix decoding's memory, measured without a model: the bundled model's own answers (the
train-head corpus, none of the bench's prompts) built into a memory at depth 24, then its bytes per
tree node, its build, its file's write and its read back, against the tree of ``--before``
(a checkout's ``decoders/methods/shared/suffix_tree.py``, e.g. main's) built the same way.

    taskset -c 1 python scripts/measure_suffix_memory.py [--before /work/main] [--copies N]

``--copies N`` builds N copies of the answers (each a response of its own: a memory of N x 1,016
responses; the copies repeat, so nodes grow less than they would with N x new answers). Prints one
line per figure, with the CPU flags and the load average beside them.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from decoders.methods.shared.suffix_memory import SuffixMemory  # noqa: E402
from decoders.methods.shared.suffix_tree import SuffixTree  # noqa: E402
from decoders.training.corpus import Corpus  # noqa: E402

DEPTH = 24


def answers() -> list[list[int]]:
    corpus = Corpus(ROOT / "corpus" / "smollm2-135m-instruct")
    return [corpus.ids(s)[s.n_prompt:] for s in corpus.samples]


def machine() -> str:
    flags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    shown = [f for f in ("avx2", "fma", "f16c", "avx512f", "avx512_bf16", "amx_tile") if f in flags]
    return f"CPU flags {' '.join(shown) or 'none of avx2/avx512'}, load average {os.getloadavg()[0]:.2f}"


def build(tree_cls, docs) -> tuple[object, float]:
    t0 = time.process_time()
    tree = tree_cls(DEPTH)
    for doc in docs:
        tree.add(doc)
    return tree, time.process_time() - t0


def traced(tree_cls, docs) -> tuple[int, int]:
    gc.collect()
    tracemalloc.start()
    tree, _ = build(tree_cls, docs)
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return size, tree.nodes


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", help="a checkout whose suffix_tree.py is the tree to compare with")
    ap.add_argument("--copies", type=int, default=1)
    ap.add_argument("--files-only", action="store_true", help="skip the trees' build and bytes (the file's figures)")
    args = ap.parse_args()
    docs = answers() * args.copies
    tokens = sum(map(len, docs))
    print(f"{len(docs)} answers, {tokens} tokens, depth {DEPTH}; {machine()}")
    trees = [("now", SuffixTree)]
    if args.before:
        spec = importlib.util.spec_from_file_location(
            "before_tree", Path(args.before) / "decoders/methods/shared/suffix_tree.py")
        assert spec is not None and spec.loader is not None
        before = importlib.util.module_from_spec(spec)
        sys.modules["before_tree"] = before  # dataclasses look their module up
        spec.loader.exec_module(before)
        trees.insert(0, ("before", before.SuffixTree))
    for name, cls in trees if not args.files_only else []:
        tree, cpu = build(cls, docs)
        nodes = tree.nodes
        del tree
        size, _ = traced(cls, docs)
        print(f"{name}: {nodes} nodes ({nodes / tokens:.1f} a token), built in {cpu:.2f} s CPU, "
              f"{size / nodes:.0f} bytes a node ({size / 1e6:.0f} MB); {machine()}")
    memory = SuffixMemory(DEPTH, max_requests=10**9, max_nodes=10**10, identity="x", model="x")
    for doc in docs:
        memory.add("", doc)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "memory.bin"
        t0 = time.process_time()
        memory.save(path)
        saved = time.process_time() - t0
        t0 = time.process_time()
        again = SuffixMemory(DEPTH, max_requests=10**9, max_nodes=10**10, identity="x", model="x")
        again.load(path, 1 << 20)
        loaded = time.process_time() - t0
        assert again.nodes == memory.nodes
        print(f"file {path.stat().st_size / 1e6:.1f} MB, written in {saved:.2f} s CPU, read back (no rebuild, every "
              f"check) in {loaded:.2f} s CPU; {machine()}")
        old = Path(tmp) / "old.json"
        import msgspec

        old.write_bytes(msgspec.json.encode({"format": "tui-decode suffix memory", "version": 1, "identity": "x",
                                             "model": "x", "responses": [["", d] for d in docs]}))
        t0 = time.process_time()
        rebuilt = SuffixMemory(DEPTH, max_requests=10**9, max_nodes=10**10, identity="x", model="x")
        rebuilt.load(old, 1 << 20)
        print(f"a first-version file ({old.stat().st_size / 1e6:.1f} MB, responses only) read and rebuilt in "
              f"{time.process_time() - t0:.2f} s CPU; {machine()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
