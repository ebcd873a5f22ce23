"""`tui-decode train-head`: grow a corpus of the target's own answers, train an EAGLE-3 head on it,
and say what it would buy (held-out acceptance per depth, the cost-aware prediction)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from tui_decode.cli.numbers import bounded_int
from tui_decode.cli.views import TrainHeadArgs

if TYPE_CHECKING:
    from decoders.records.folder import FolderLock
    from decoders.records.stored import TrainingReport


def bounded_float(flag: str, low: float, high: float):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} takes a number, got {text[:40]!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{flag} must be in {low:g}..{high:g}, got {text[:40]}")
        return value
    return parse


def add_train_parser(sub) -> None:
    from tui_decode.cli.main import add_threads_arg
    from tui_decode.cli.model_args import add_model_args

    p = sub.add_parser("train-head", help="train an EAGLE-3 draft head for the main model on its own answers",
                       description="Self-distillation: the main model answers training prompts (never the "
                                   "Spec-Bench or MT-bench ones), its hidden states are read teacher-forced, and a "
                                   "one-layer EAGLE-3 head learns to guess its next tokens. Resumable.")
    p.add_argument("--corpus", required=True, metavar="FOLDER",
                   help="the corpus of the main model's answers (created if missing, grown by --grow)")
    p.add_argument("--out", metavar="FOLDER", help="where the head goes (config.json, model.safetensors, "
                                                   "training.json); leave out to only grow the corpus")
    p.add_argument("--grow", type=bounded_float("--grow", 0, 24 * 60), default=0.0, metavar="MINUTES",
                   help="first add MINUTES of new answers to the corpus (batched greedy generation)")
    p.add_argument("--grow-batch", type=bounded_int("--grow-batch", 1, 256), default=24, metavar="N",
                   help="training prompts --grow answers at once (1..256, default 24): a batch keeps the CPU busier "
                        "than one answer at a time; an interrupted --grow loses at most one batch")
    p.add_argument("--epochs", type=bounded_float("--epochs", 0.01, 100), default=4.0, metavar="E",
                   help="passes over the corpus (0.01..100, fractions allowed; default 4); a run resumed from its "
                        "checkpoint may raise it")
    p.add_argument("--draft-vocab", type=bounded_int("--draft-vocab", 256, 262_144), default=8192, metavar="N",
                   help="rows of the head's LM head: the N tokens the main model writes most often")
    p.add_argument("--ttt", type=bounded_int("--ttt", 1, 8), default=3, metavar="D",
                   help="training-time test: unrolled draft depths per batch (EAGLE-3)")
    p.add_argument("--max-tokens", type=bounded_int("--max-tokens", 0, 100_000_000), default=0, metavar="N",
                   help="train on the corpus's first N tokens only (0: all; a learning curve runs this at sizes)")
    p.add_argument("--curve-points", type=bounded_int("--curve-points", 0, 100), default=6, metavar="N",
                   help="held-out evaluations during training, the learning curve's points (default 6; 0: none)")
    p.add_argument("--measure-tokens", type=bounded_int("--measure-tokens", 0, 512), default=48, metavar="N",
                   help="after training, a speculative run of N tokens with the new head on this machine: its "
                        "cost, speedup and the cost-aware Theorem 3.8 prediction (0: skip)")
    p.add_argument("--lr", type=bounded_float("--lr", 1e-6, 1.0), default=1e-3, metavar="RATE",
                   help="AdamW's peak learning rate (1e-6..1, default 1e-3), warmed up over 20 steps then cosine-"
                        "decayed to 0")
    p.add_argument("--fresh", action="store_true",
                   help="start the head's training over, whatever checkpoint --out holds (a finished head is "
                        "otherwise not trained further)")
    p.add_argument("--wait", action="store_true",
                   help="when another train-head is writing the same --out or growing the same --corpus, wait for "
                        "it to end (otherwise: one line saying which process, exit 2)")
    add_threads_arg(p)
    add_model_args(p, drafts=False)  # the head it trains is the draft; it trains on torch's hidden states


def cmd_train_head(namespace: argparse.Namespace) -> int:
    from decoders.core.errors import DecodeError
    from decoders.training.corpus import corpus_lock
    from decoders.training.session import TrainSettings, check_settings, head_lock
    from tui_decode.cli.main import check_threads, stdout_console

    args = TrainHeadArgs.of(namespace)
    check_threads(args.threads)
    for flag, value in (("--corpus", args.corpus), ("--out", args.out)):
        if value is not None and not value.strip():
            raise DecodeError(f"{flag} is empty; give the path of a folder (or leave --out out to only grow the "
                              "corpus)")
    if Path(args.corpus).exists() and not Path(args.corpus).is_dir():
        raise DecodeError(f"--corpus {args.corpus[:200]} is a file; give a folder for the corpus (created if "
                          "missing).")
    settings = None
    if args.out:
        settings = TrainSettings(corpus=args.corpus, out=args.out, main=args.model.main or "bundled",
                                 draft_vocab=args.draft_vocab, ttt=args.ttt, epochs=args.epochs, lr=args.lr,
                                 max_tokens=args.max_tokens, curve_points=args.curve_points)
        check_settings(settings)  # an unwritable or full --out fails before the model loads
    console = stdout_console()
    # One writer a folder: the head folder's lock for the whole command (training, then --measure-tokens'
    # line in training.json), taken before the model loads; the corpus's until --grow has appended to it.
    def say(line: str) -> None:
        console.print(line, markup=False, highlight=False)

    head = head_lock(settings.out, args.wait, say) if settings else None
    corpus = corpus_lock(args.corpus, args.wait, say) if args.grow else None
    try:
        for lock in (head, corpus):  # always the head's first: two commands waiting never wait for each other
            if lock is not None:
                lock.acquire()
        return _train(args, settings, console, corpus)
    finally:
        for lock in (corpus, head):
            if lock is not None:
                lock.release()


def _train(args: TrainHeadArgs, settings, console, corpus_held: FolderLock | None
           ) -> int:
    from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from decoders.training.corpus import Corpus
    from decoders.training.grow import grow
    from decoders.training.session import train_head
    from tui_decode.cli.main import load_with_progress, set_threads
    from tui_decode.cli.model_args import family_spec

    set_threads(args.threads)
    spec = family_spec(args.model)
    spec = replace(spec, draft=None)  # the head is what we train
    family = load_with_progress(spec, console)
    if args.grow:
        with Corpus(args.corpus, model=family.main_source, vocab_size=family.vocab_size, append=True) as corpus:
            grow(corpus, family, args.grow * 60, batch=args.grow_batch, report=lambda line: console.print(line))
    if corpus_held is not None:
        corpus_held.release()  # training reads the corpus; another --grow may append meanwhile
    if settings is None:
        return 0
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                  console=console) as bar:
        tasks: dict[str, TaskID] = {}
        tenths: dict[str, int] = {}  # the tenth of each phase last printed when stdout is no terminal

        def progress(phase: str, n: int, total: int, info: dict) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total, info="")
            text = f"loss {info['loss']:.3f}" if "loss" in info else ""
            if "tokens" in info:
                text += f", {info['tokens']:,} tokens seen"
            bar.update(tasks[phase], completed=n, total=total, info=text)
            tenth = 10 * n // max(total, 1)
            if not console.is_terminal and tenths.get(phase) != tenth:  # a log file: a bar draws only at the end
                tenths[phase] = tenth
                console.print(f"{phase}: {n}/{total}" + (f" ({text})" if text else ""))

        summary = train_head(settings, family, report=lambda line: bar.console.print(line), progress=progress,
                             fresh=args.fresh, wait=args.wait)
    accept = ", ".join(f"{a:.0%}" for a in summary.accept_per_depth)
    console.print(f"head written to {settings.out}: held-out acceptance per depth {accept}; "
                  f"mean accepted {summary.mean_accepted:.2f} of a {settings.ttt}-token chain "
                  f"({summary.heldout_positions} positions; trained on {summary.train_tokens} tokens)")
    if args.measure_tokens:
        measure(args, spec, settings, summary, console)
    return 0


def measure(args: TrainHeadArgs, spec, settings, summary: TrainingReport, console) -> None:
    """The new head on this machine: a short speculative run, its figures beside Theorem 3.8's
    prediction, printed and added to training.json."""
    from pathlib import Path

    from decoders.engine import Engine
    from decoders.models.drafts import TrainedHead
    from decoders.training.predict import on_this_machine, sentence
    from decoders.training.session import REPORT
    from tui_decode.cli.main import load_with_progress

    family = load_with_progress(replace(spec, draft=TrainedHead(folder=settings.out)), console)
    figures = on_this_machine(Engine(family), summary.accept_per_depth, settings.ttt, args.measure_tokens)
    console.print(sentence(figures))
    summary.this_machine = figures
    summary.write(Path(settings.out) / REPORT)
