"""Grow a head's corpus: the target answers training prompts, greedy, in batches.

Self-distillation: a draft head is judged by how often it guesses the target's own next token,
so the target's own answers are the data that matches (greedy answers, since greedy decoding is
what the identity checks and most benchmarks run). Batched `generate` of transformers keeps a
CPU busier than one sequence at a time (26-55 tokens/s at batch 16-32 against 15-25 for one
sequence on these 2-core machines). Each answer is appended as soon as its batch is done, so an
interrupted run loses at most one batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from decoders.training.corpus import Corpus
from decoders.training.prompts import context_prompt, more_prompts, summary_prompt, training_prompts

SUMMARY_EVERY = 6  # one summary of an earlier answer per this many plain prompts
SUMMARY_MIN_TOKENS = 80  # answers long enough to be worth summarising


def pending(corpus: Corpus, prompts: list[str], count: int,
            decode: Callable[[list[int]], str], more: list[str] | None = None) -> list[tuple[str, str]]:
    """The next ``count`` (key, prompt) pairs the corpus lacks: the first set's prompts ("p") and the
    second's ("q", two for each "p") in their fixed order, with a summary ("s") or a question about
    ("r") an earlier long answer after every ``SUMMARY_EVERY`` of them."""
    done = corpus.keys()
    first = [(f"p{i}", text) for i, text in enumerate(prompts) if f"p{i}" not in done]
    second = [(f"q{i}", text) for i, text in enumerate(more or []) if f"q{i}" not in done]
    plain: list[tuple[str, str]] = []
    while first or second:
        plain.extend(second[:2])
        del second[:2]
        plain.extend(first[:1])
        del first[:1]
    out: list[tuple[str, str]] = []
    long_answers = [s for s in corpus.samples if s.key[0] in "pq" and s.n_answer >= SUMMARY_MIN_TOKENS]
    summarisable = [("s", s) for s in long_answers if f"s{s.key}" not in done]
    if more is not None:
        summarisable += [("r", s) for s in long_answers if f"r{s.key}" not in done]
        summarisable.sort(key=lambda pair: (pair[1].start, pair[0] == "r"))
    while len(out) < count and (plain or summarisable):
        if summarisable and ((len(out) + 1) % SUMMARY_EVERY == 0 or not plain):
            kind, sample = summarisable.pop(0)
            document = decode(corpus.ids(sample)[sample.n_prompt:])
            text = summary_prompt(document) if kind == "s" else context_prompt(document)
            out.append((f"{kind}{sample.key}", text))
        else:
            out.append(plain.pop(0))
    return out


def grow(corpus: Corpus, family, seconds: float, batch: int = 16, max_new_tokens: int = 192,
         report: Callable[[str], None] = print, prompts: list[str] | None = None) -> int:
    """Append answers for ``seconds`` (whole batches); returns how many answer tokens were added."""
    import torch

    model, tokenizer = family.main_model, family.tokenizer
    more = None if prompts else more_prompts()
    prompts = prompts or training_prompts()
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(family.stop_ids)
    stops = sorted(family.stop_ids)
    started = time.monotonic()
    added = 0
    while time.monotonic() - started < seconds:
        todo = pending(corpus, prompts, batch, family.decode, more)
        if not todo:
            report("every prompt is answered")
            break
        encoded = [family.encode_prompt(text, chat_template=True) for _, text in todo]
        width = max(len(ids) for ids in encoded)
        ids = torch.tensor([[pad] * (width - len(e)) + e for e in encoded])
        mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded])
        t0 = time.monotonic()
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=False,
                                 pad_token_id=pad, eos_token_id=stops)
        tokens = 0
        for (key, _), prompt_ids, row in zip(todo, encoded, out[:, width:].tolist(), strict=True):
            answer = _until_stop(row, family.stop_ids)
            corpus.append(key, prompt_ids, answer)
            tokens += len(answer)
        added += tokens
        rate = tokens / max(1e-9, time.monotonic() - t0)
        report(f"{len(corpus.samples)} samples, {corpus.n_answer_tokens} answer tokens "
               f"(+{tokens} at {rate:.0f} tokens/s)")
    return added


def _until_stop(row: list[int], stops) -> list[int]:
    """The answer up to and including its first stop token (the head learns to end, too)."""
    for i, token in enumerate(row):
        if token in stops:
            return row[: i + 1]
    return row


def main(argv: list[str] | None = None) -> int:
    import argparse

    import torch

    from decoders.models.family import FamilySpec, load_family

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--main", default="bundled")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    family = load_family(FamilySpec("corpus", main=args.main), fast=False)
    with Corpus(args.corpus, model=family.main_source, vocab_size=family.vocab_size, append=True) as corpus:
        grow(corpus, family, args.minutes * 60, batch=args.batch)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
