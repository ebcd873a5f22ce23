"""One `tui-decode train-head` run: corpus -> features -> draft vocabulary -> training -> evaluation.

Resumable: a checkpoint (the head, the optimiser, the step, the settings) is written atomically to
the output folder every ``CHECKPOINT_SECONDS`` and at the end of every phase; a second run with the
same settings continues from it (a finished one is not trained further: more epochs than it was
trained for are refused in one line, `--fresh` starts over). Everything a user can type is bounded
and checked before the model loads; a full disk or an unwritable folder is one line, and nothing
written before is lost.

One run writes a head folder at a time (`head_lock`: a second is told who is writing it, or waits);
the temporary files of a killed one are removed when the next starts; the head's files name one
id (`decoders.backends.heads.load.save_head`), so a head cut off between its files is refused on
load, and the next run writes it whole from its checkpoint.
"""

from __future__ import annotations

import io
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from decoders.core.errors import DecodeError
from decoders.records.atomic import write_bytes
from decoders.records.folder import FolderLock, sweep_temps
from decoders.records.stored import TrainingReport, TrainSettings

if TYPE_CHECKING:
    from decoders.models.family import Family

CHECKPOINT = "checkpoint.pt"
REPORT = TrainingReport.FILE
CHECKPOINT_SECONDS = 60.0
MIN_FREE_DISK = 200 * 2**20


BOUNDS = {"draft_vocab": (256, 262_144), "ttt": (1, 8), "epochs": (0.01, 100.0), "batch_tokens": (64, 16_384),
          "holdout": (2, 1000), "max_tokens": (0, 100_000_000), "lr": (1e-6, 1.0), "curve_points": (0, 100)}


def check_settings(s: TrainSettings) -> None:
    for name, (low, high) in BOUNDS.items():
        value = getattr(s, name)
        if not low <= value <= high:
            raise DecodeError(f"--{name.replace('_', '-')} {value} is out of range; choose {low} to {high}.")
    out = Path(s.out)
    if out.exists() and not out.is_dir():
        raise DecodeError(f"--out {s.out[:200]} is a file; give a folder for the head.")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".tmp-probe.{os.getpid()}.written"  # its own name: two runs at once never share it
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise DecodeError(f"Cannot write the head to {s.out[:200]} ({err.strerror or err}); "
                          "choose a folder you can write to.") from None
    free = shutil.disk_usage(out).free
    if free < MIN_FREE_DISK:
        raise DecodeError(f"Only {free // 2**20} MB free where the head goes ({s.out[:200]}); a head and its "
                          f"checkpoint need about {MIN_FREE_DISK // 2**20} MB: free disk space or choose another "
                          "--out.")


def head_lock(out: str | Path, wait: bool = False, on_wait: Callable[[str], None] | None = None) -> FolderLock:
    """The head folder's lock (not yet taken): one `train-head` writes a head folder at a time."""
    return FolderLock(out, "the head folder", wait=wait, on_wait=on_wait)


def save_checkpoint(out: Path, head, optimizer, step: int, settings: TrainSettings, phase: str,
                    curve: list | None = None, seconds: float = 0.0) -> None:
    """``seconds``: the training time spent so far, over every run that made this checkpoint."""
    import torch

    buffer = io.BytesIO()
    torch.save({"head": head.state_dict(), "config": asdict(head.config), "optimizer": optimizer.state_dict()
                if optimizer is not None else None, "step": step, "settings": settings.to_json(), "phase": phase,
                "curve": curve or [], "train_seconds": seconds}, buffer)
    write_bytes(out / CHECKPOINT, buffer.getvalue(), "the training checkpoint")


def load_checkpoint(out: Path, settings: TrainSettings) -> dict | None:
    """The checkpoint of an interrupted run with the same settings, or None. A finished run's
    (phase "done") only with the same epochs: training a finished head further is refused."""
    import torch

    path = out / CHECKPOINT
    if not path.exists():
        return None
    try:
        state = torch.load(str(path), map_location="cpu", weights_only=False)
    except Exception as err:
        raise DecodeError(f"The checkpoint {path} cannot be read ({type(err).__name__}); delete it to start "
                          "over.") from None
    same = {k: v for k, v in state.get("settings", {}).items() if k != "epochs"}
    if same != {k: v for k, v in settings.to_json().items() if k != "epochs"}:
        raise DecodeError(f"{path} is a checkpoint of a run with other settings; give another --out, or "
                          "add --fresh to start over.")
    epochs = state.get("settings", {}).get("epochs")
    if state.get("phase") == "done" and epochs != settings.epochs:
        raise DecodeError(f"The head in {str(out)[:200]} finished training for {epochs:g} epochs; training it to "
                          f"{settings.epochs:g} would start over: give a new --out, or add --fresh to train this one "
                          "again from the start.")
    return state


def train_head(settings: TrainSettings, family: Family, report: Callable[[str], None] = print,
               progress: Callable[[str, int, int, dict], None] | None = None, fresh: bool = False,
               wait: bool = False) -> TrainingReport:
    """Train (or resume) and evaluate; write the head and ``training.json``; return the report.
    ``fresh``: start over, whatever checkpoint the folder holds. Holds the head folder's lock
    (`FolderBusy` when another process holds it, unless ``wait``)."""
    check_settings(settings)
    with head_lock(settings.out, wait, report):
        for name in sweep_temps(settings.out, locked=True):
            report(f"removed {name}, a temporary file of an interrupted write")
        return _train_head(settings, family, report, progress, fresh)


def _train_head(settings: TrainSettings, family: Family, report: Callable[[str], None],
                progress: Callable[[str, int, int, dict], None] | None, fresh: bool) -> TrainingReport:
    import torch

    from decoders.backends.heads.eagle import EagleHead, HeadConfig
    from decoders.backends.heads.load import save_head
    from decoders.backends.heads.training import draft_vocabulary, evaluate, extract, new_head, train_steps
    from decoders.models.memory import available_memory, check_memory
    from decoders.training.corpus import Corpus

    out = Path(settings.out)
    model = family.main_model
    corpus = Corpus(settings.corpus)
    from decoders.backends.heads.load import target_shape

    made_for, vocab = corpus.meta.vocab_size, target_shape(model).vocab
    if isinstance(made_for, int) and made_for != vocab:
        raise DecodeError(f"The corpus in {settings.corpus[:200]} was generated with a vocabulary of {made_for} "
                          f"tokens, the main model's has {vocab}; give the --corpus folder of this model's answers.")
    if not corpus.samples:
        raise DecodeError(f"The corpus {settings.corpus} is empty; grow it first (tui-decode train-head --grow "
                          "MINUTES).")
    samples = list(corpus.samples)
    if settings.max_tokens:
        kept, count = [], 0
        for sample in samples:
            if count >= settings.max_tokens:
                break
            kept.append(sample)
            count += sample.end - sample.start
        samples = kept
    state = None if fresh else load_checkpoint(out, settings)
    head = None
    if state is not None and state["phase"] == "done":
        report(f"the head's training in {out} is finished (its checkpoint says so): evaluating it and writing "
               "it again")
    elif state is not None:
        report(f"resuming from {out / CHECKPOINT} at step {state['step']}")
    if state is not None:
        config = state["config"]
        config["aux_layers"] = tuple(config["aux_layers"])
        head = EagleHead(HeadConfig(**config))
        head.load_state_dict(state["head"])
    aux = head.config.aux_layers if head is not None else None
    from decoders.backends.heads.load import default_aux_layers

    aux = aux or default_aux_layers(target_shape(model).n_layers)
    width = len(aux) * target_shape(model).hidden
    n_tokens = sum(s.end - s.start for s in samples)
    check_memory(n_tokens * (width * 2 + 16), f"the features of {n_tokens} corpus tokens", available_memory(),
                 "in main memory", "lower --max-tokens")
    from decoders.training.feature_cache import FeatureCache, cache_file

    t0 = time.monotonic()
    cache = FeatureCache(cache_file(model, family.main_source, tuple(aux),
                                    settings.corpus),
                         report)
    cached = len(cache.entries)
    features = extract(model, corpus, aux, samples,
                       (lambda n, k: progress("features", n, len(samples), {})) if progress else None, cache=cache)
    extract_rate = features.n_tokens / max(1e-9, time.monotonic() - t0)
    report(f"features of {features.n_tokens} tokens at {extract_rate:.0f} tokens/s"
           + (f" ({cached} samples from the feature cache {cache.path})" if cached else ""))
    held = list(range(0, len(samples), settings.holdout))
    train_ids = [i for i in range(len(samples)) if i % settings.holdout]
    if head is None:  # the draft vocabulary from the training samples only: the held-out ones judge it
        draft_ids = draft_vocabulary([features.labels[i] for i in train_ids] or features.labels,
                                     target_shape(model).vocab, settings.draft_vocab)
        head = new_head(model, draft_ids, aux)
    to_draft = torch.full((head.config.vocab,), -100, dtype=torch.long)
    to_draft[head.draft_ids] = torch.arange(head.config.draft_vocab)
    embed = model.get_input_embeddings().weight.detach()
    last_save = [time.monotonic()]
    started = time.monotonic()
    before = float(state.get("train_seconds", 0.0)) if state else 0.0  # the earlier runs' training time

    def seconds() -> float:
        return before + time.monotonic() - started

    train_tokens = sum(int(features.ids[i].numel()) for i in train_ids)
    curve: list[dict] = list(state.get("curve", [])) if state else []

    latest: list = []  # (step, optimizer) of the last finished step

    def on_step(step, total, loss, optimizer):
        latest[:] = [step, optimizer]
        if progress:
            progress("training", step, total,
                     {"loss": loss, "tokens": round(train_tokens * settings.epochs * step / max(1, total))})
        if settings.curve_points and step % max(1, total // settings.curve_points) == 0 and step < total:
            curve.append(curve_point(step, total))
        if time.monotonic() - last_save[0] > CHECKPOINT_SECONDS:
            save_checkpoint(out, head, optimizer, step, settings, "training", curve, seconds())
            last_save[0] = time.monotonic()

    def curve_point(step: int, total: int) -> dict:
        at = evaluate(head, embed, features, held, settings.ttt, to_draft)
        return {"step": step, "tokens_seen": round(train_tokens * settings.epochs * step / total),
                "accept_per_depth": [round(a, 4) for a in at.accept], "mean_accepted": round(at.mean_accepted, 4)}

    resume = state if state is not None and state["phase"] == "training" else None
    optimizer = None
    if train_ids and (state is None or resume is not None):
        try:
            optimizer = train_steps(head, embed, features, train_ids, settings.ttt, to_draft, settings.epochs,
                                    settings.lr, settings.batch_tokens, on_step, resume, settings.seed)
        except BaseException:  # ctrl+c, SIGTERM, a full disk: the steps done so far resume next time
            if latest:
                try:
                    save_checkpoint(out, head, latest[1], latest[0], settings, "training", curve, seconds())
                except Exception:  # noqa: BLE001 - the error that stopped us is the one to report
                    pass
            raise
    train_seconds = seconds() if state is None or resume is not None else before  # a finished head: its own
    save_checkpoint(out, head, optimizer, -1, settings, "done", curve, train_seconds)
    result = evaluate(head, embed, features, held, settings.ttt, to_draft)
    curve.append({"step": "end", "tokens_seen": round(train_tokens * settings.epochs),
                  "accept_per_depth": [round(a, 4) for a in result.accept],
                  "mean_accepted": round(result.mean_accepted, 4)})
    summary = TrainingReport.from_json({
        "corpus": settings.corpus, "corpus_samples": len(samples), "train_tokens": train_tokens,
        "heldout_positions": result.positions, "accept_per_depth": [round(a, 4) for a in result.accept],
        "mean_accepted": round(result.mean_accepted, 4), "train_seconds": round(train_seconds, 3),
        "extract_tokens_per_s": round(extract_rate, 1), "learning_curve": curve,
        "answer_tokens_heldout_only": True, "settings": settings.to_json()})
    save_head(head, out, training=summary)  # the weights, training.json, then config.json naming both's id
    return summary
