"""Spec-Bench prompts: reading a JSONL file, task groups, and a representative selection."""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from decoders.core.errors import DecodeError
from decoders.records.codec import Record

#: Spec-Bench's task groups, in its column order: (key, label, categories).
TASK_GROUPS: tuple[tuple[str, str, frozenset[str]], ...] = (
    ("multi_turn", "multi-turn conversation",
     frozenset({"writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"})),
    ("translation", "translation", frozenset({"translation"})),
    ("summarization", "summarization", frozenset({"summarization"})),
    ("qa", "question answering", frozenset({"qa"})),
    ("math_reasoning", "mathematical reasoning", frozenset({"math_reasoning"})),
    ("rag", "retrieval-augmented generation", frozenset({"rag"})),
)
GROUP_LABELS = {key: label for key, label, _ in TASK_GROUPS}
_GROUP_KEYS = [key for key, _, _ in TASK_GROUPS]
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def task_group(category: str) -> str:
    """The Spec-Bench task group of a category (an unknown category is a group of its own)."""
    for key, _, categories in TASK_GROUPS:
        if category in categories:
            return key
    return category


def group_label(group: str) -> str:
    """A task group's label for people ("rag" -> "retrieval-augmented generation")."""
    return GROUP_LABELS.get(group, group)


def group_rank(group: str) -> int:
    """A group's place in Spec-Bench's column order; unknown groups come last."""
    return _GROUP_KEYS.index(group) if group in _GROUP_KEYS else len(_GROUP_KEYS)


@dataclass(frozen=True)
class BenchPrompt:
    """One Spec-Bench record, reduced to what a decoding benchmark uses: the first turn (``text``).

    A multi-turn record (MT-bench's) keeps its later user turns in ``later`` as the file holds them,
    checked only where they are run (`session_turns`: ``bench --workload session``). A later turn
    run is a prompt of its own (`next_turn`): its ``text`` that turn's message, ``history`` the
    conversation before it (user, assistant, user, ...), ``turn`` its number (1 for the first)."""

    question_id: Any
    category: str
    text: str
    later: tuple[Any, ...] = ()
    where: str = ""  # the file and line it came from, for a message about a later turn
    history: tuple[str, ...] = ()
    turn: int = 1

    @property
    def group(self) -> str:
        return task_group(self.category)

    @property
    def name(self) -> str:
        return f"q{self.question_id}" + (f" turn {self.turn}" if self.turn > 1 else "")

    def next_turn(self, answer: str) -> BenchPrompt | None:
        """The record's next turn after ``answer`` (the model's answer to this one), or None when
        this is its last."""
        turns = session_turns(self)
        if self.turn >= len(turns):
            return None
        return replace(self, text=turns[self.turn], history=self.history + (self.text, answer), turn=self.turn + 1)

    def record(self, prompt_tokens: int) -> PromptRecord:
        """The report's record of this prompt, with its length in tokens."""
        return PromptRecord(self.question_id, self.category, self.group, prompt_tokens)


class PromptRecord(Record):
    """One prompt as a report lists it."""

    question_id: Any
    category: str
    group: str
    prompt_tokens: int


def load_prompts(path: str | os.PathLike) -> list[BenchPrompt]:
    """Read a Spec-Bench JSONL file; DecodeError naming the file and line for anything malformed."""
    from decoders.records.inputs import MAX_PROMPTS_BYTES, decode_utf8, read_upto

    path = Path(path)
    try:
        raw = read_upto(path, MAX_PROMPTS_BYTES)
    except FileNotFoundError:
        raise DecodeError(f"no prompts file at {path}; give a Spec-Bench JSONL file to --prompts "
                          "(e.g. bench/spec_bench_dev.jsonl)") from None
    except IsADirectoryError:
        raise DecodeError(f"{path} is a folder; give a Spec-Bench JSONL file to --prompts") from None
    except OSError as exc:
        raise DecodeError(f"cannot read the prompts file {path}: {exc.strerror or exc}; give a Spec-Bench JSONL "
                          "file to --prompts") from None
    if len(raw) > MAX_PROMPTS_BYTES:
        raise DecodeError(f"the prompts file {path} is larger than {MAX_PROMPTS_BYTES >> 20} MiB, the most "
                          "that is read; give a smaller Spec-Bench JSONL file to --prompts")
    lines = decode_utf8(raw, f"the prompts file {path}", "give a Spec-Bench JSONL file to --prompts").splitlines()
    prompts = [_parse_line(line, f"{path} line {number}") for number, line in enumerate(lines, 1) if line.strip()]
    if not prompts:
        raise DecodeError(f"{path} holds no prompts; give a Spec-Bench JSONL file with one record per line")
    return prompts


def _parse_line(line: str, where: str) -> BenchPrompt:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DecodeError(f"{where} is not valid JSON ({exc.msg}); each line must be one JSON object "
                          "with question_id, category and turns") from None
    except RecursionError:
        raise DecodeError(f"{where} is not a Spec-Bench record (its JSON is nested too deeply to read); each line "
                          "must be one JSON object with question_id, category and turns") from None
    if not isinstance(record, dict):
        raise DecodeError(f"{where} is not a JSON object; each line must hold question_id, category and turns")
    missing = [key for key in ("question_id", "category", "turns") if key not in record]
    if missing:
        raise DecodeError(f"{where} lacks {', '.join(missing)}; Spec-Bench records have question_id, "
                          "category and turns")
    turns = record["turns"]
    if not isinstance(turns, list) or not turns or not isinstance(turns[0], str) or not turns[0].strip():
        raise DecodeError(f"{where}: turns must be a list whose first item is the (non-empty) user message")
    if not isinstance(record["category"], str):
        raise DecodeError(f"{where}: category must be a string")
    qid = record["question_id"]
    if isinstance(qid, float) and not math.isfinite(qid):
        raise DecodeError(f"{where}: question_id is {qid}, which the JSON report cannot hold; give an integer or a "
                          "string")
    if isinstance(qid, bool) or not isinstance(qid, (int, float, str)):
        raise DecodeError(f"{where}: question_id must be an integer or a string, got {str(qid)[:40]}")
    from decoders.records.inputs import MAX_PROMPT_BYTES, check_text

    for name, text in (("the first turn", turns[0]), ("category", record["category"])) + (
            (("question_id", qid),) if isinstance(qid, str) else ()):
        check_text(text, f"{where}: {name}", "write it as UTF-8 text (a lone \\ud800 escape is not a character)")
        control = _CONTROL.search(text) if name != "the first turn" else None
        if control:  # the tables print these labels: an escape sequence would reach the terminal
            raise DecodeError(f"{where}: {name} holds the control character U+{ord(control.group()):04X}; write it "
                              "as plain text")
    if len(turns[0].encode("utf-8")) > MAX_PROMPT_BYTES:
        raise DecodeError(f"{where}: the first turn is longer than {MAX_PROMPT_BYTES >> 20} MiB, the most a prompt "
                          "may be; shorten it")
    return BenchPrompt(qid, record["category"], turns[0], tuple(turns[1:]), where)


def session_turns(prompt: BenchPrompt) -> list[str]:
    """Every user turn of ``prompt``'s record, first to last, each checked as the first is
    (`load_prompts`); DecodeError in one line naming the file, line and turn."""
    from decoders.records.inputs import MAX_PROMPT_BYTES, check_text

    turns = [prompt.text if prompt.turn == 1 and not prompt.history else prompt.history[0]]
    where = prompt.where or prompt.name
    for number, text in enumerate(prompt.later, 2):
        if not isinstance(text, str) or not text.strip():
            raise DecodeError(f"{where}: turn {number} must be a non-empty string (the user's message); fix it, or "
                              "run the first turns only (--workload prompts)")
        check_text(text, f"{where}: turn {number}", "write it as UTF-8 text (a lone \\ud800 escape is not a character)")
        if len(text.encode("utf-8")) > MAX_PROMPT_BYTES:
            raise DecodeError(f"{where}: turn {number} is longer than {MAX_PROMPT_BYTES >> 20} MiB, the most a prompt "
                              "may be; shorten it")
        turns.append(text)
    return turns


def select_prompts(prompts: Sequence[BenchPrompt], limit: int | None) -> list[BenchPrompt]:
    """The first ``limit`` prompts taken round-robin over task groups (file order within each).

    Spec-Bench files are sorted by group, so the first N lines would cover only the first
    groups; round-robin keeps a small run representative of all of them.
    """
    if limit is None or limit >= len(prompts):
        return list(prompts)
    queues: dict[str, list[BenchPrompt]] = {}
    for prompt in prompts:
        queues.setdefault(prompt.group, []).append(prompt)
    chosen: list[BenchPrompt] = []
    while len(chosen) < limit:
        for queue in queues.values():
            if queue and len(chosen) < limit:
                chosen.append(queue.pop(0))
    order = {id(p): i for i, p in enumerate(prompts)}
    return sorted(chosen, key=lambda p: (group_rank(p.group), order[id(p)]))
