"""`tui-decode datastore build`: fill a suffix-decoding memory (`--suffix-memory PATH`) from a corpus:
a train-head corpus folder (the model's own answers), a JSONL file or a text file. Reports the
memory's size, its token count and the build time."""

from __future__ import annotations

import argparse

from decoders.core.errors import DecodeError
from tui_decode.cli.model_args import add_model_args
from tui_decode.cli.numbers import bounded_int
from tui_decode.cli.views import ModelFlags

MAX_DEPTH = 64


def add_memory_mb_arg(p: argparse.ArgumentParser) -> None:
    """``--suffix-memory-mb MB``: the suffix memory's size bound (its tree's nodes at the measured
    bytes per node); responses beyond it are evicted oldest first, and a file over it is refused."""
    from decoders.methods.shared.suffix_memory import DEFAULT_MB, MAX_MB, MAX_REQUESTS

    p.add_argument("--suffix-memory-mb", type=bounded_int("--suffix-memory-mb", 1, MAX_MB), default=None,
                   metavar="MB", help=f"suffix decoding: the memory's size bound in MB (1..{MAX_MB}, default "
                                      f"{DEFAULT_MB}); with at most {MAX_REQUESTS:,} responses, the oldest "
                                      "evicted first")


def add_datastore_parser(sub) -> None:
    p = sub.add_parser("datastore", help="build a suffix-decoding memory from a corpus (for run --suffix-memory)")
    actions = p.add_subparsers(dest="datastore_command", required=True)
    build = actions.add_parser("build", help="fill a memory file from a corpus: a train-head corpus folder, "
                                             "a JSONL file ({\"text\": ...} per line) or a text file")
    build.add_argument("--corpus", required=True, metavar="PATH", help="the corpus (folder, .jsonl or text file)")
    build.add_argument("--out", required=True, metavar="PATH",
                       help="the memory file; an existing memory of this model is added to")
    build.add_argument("--depth", type=bounded_int("--depth", 2, MAX_DEPTH), default=24, metavar="N",
                       help=f"longest substring indexed (2..{MAX_DEPTH}, default 24: --suffix-depth's default)")
    add_memory_mb_arg(build)
    add_model_args(build, drafts=False)


def cmd_datastore(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.console import Console

    from decoders.methods.shared.suffix_memory import MAX_RESPONSE_TOKENS, open_memory_file
    from decoders.training.datastore import build, documents, read_texts
    from tui_decode.cli.main import check_memory_path, load_with_progress, stdout_console
    from tui_decode.cli.model_args import family_spec

    if not args.corpus.strip() or not args.out.strip():
        raise DecodeError("--corpus and --out need paths; give the corpus and the memory file to write")
    if not Path(args.corpus).exists():
        raise DecodeError(f"the corpus {args.corpus} does not exist; give a corpus folder, .jsonl or text file")
    # a whole memory file within the bound (or one that can be made), kept by no other process
    check_memory_path(args.out, mb=args.suffix_memory_mb, flag="--out")
    texts = read_texts(args.corpus)  # a corpus that is not text, or empty, fails before the model loads
    err = Console(stderr=True)
    family = load_with_progress(family_spec(ModelFlags.of(args)), err)
    # refuses a damaged or foreign file, or one over the size bound, untouched
    memory = open_memory_file(family, args.out, args.depth, args.suffix_memory_mb, flag="--out")
    with err.status("reading the corpus ..."):
        docs = documents(args.corpus, family, texts)
    with err.status(f"building the memory from {len(docs)} documents ..."):
        report = build(memory, docs, args.out)
    out = stdout_console()
    out.print(f"memory {args.out}: {report.responses} responses, {memory.tokens} tokens, {report.nodes} tree nodes "
              f"(depth {args.depth}), {report.file_bytes / 1e6:.1f} MB on disk; added {report.documents} documents "
              f"({report.tokens} tokens) in {report.seconds:.2f} s"
              + (f"; {report.cut} longer than {MAX_RESPONSE_TOKENS:,} tokens cut to their first "
                 f"{MAX_RESPONSE_TOKENS:,} (split them into documents to keep the rest)" if report.cut else "")
              + (f"; {report.evicted} oldest evicted to stay within the bounds" if report.evicted else ""),
              markup=False, highlight=False, soft_wrap=True)
    return 0
