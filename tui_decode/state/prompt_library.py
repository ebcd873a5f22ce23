"""The prompts a first run can start from: the Spec-Bench prompts shipped in ``bench/`` (Apache-2.0,
see bench/LICENSE-spec-bench.txt), by task group, and the user's own ``*.txt`` files in the
prompts folder. The groups whose answers copy most from the prompt come first (summarization,
retrieval-augmented generation): there prompt lookup's drafts are accepted most, so a first run
shows what parallel decoding buys. No Textual here."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from decoders.bench.prompts import group_label, load_prompts
from decoders.core.errors import DecodeError
from decoders.records.inputs import read_text

PROMPTS_DIR_ENV = "TUI_DECODE_PROMPTS_DIR"
#: Copy-heavy groups first (prompt lookup's best case), then Spec-Bench's column order.
GROUP_ORDER = ("summarization", "rag", "translation", "qa", "math_reasoning", "multi_turn")
MAX_USER_PROMPTS = 200  # files listed from the prompts folder, newest first
MAX_PROMPT_BYTES = 4 << 20  # as --prompt-file reads


@dataclass(frozen=True)
class LibraryPrompt:
    group: str  # a Spec-Bench task group's label, or "your prompts"
    name: str
    text: str

    @property
    def key(self) -> str:
        return f"{self.group}/{self.name}"


def shipped_prompts_file() -> Path:
    """bench/spec_bench_dev.jsonl beside the package (the repository's copy, installed editable)."""
    return Path(__file__).resolve().parents[2] / "bench" / "spec_bench_dev.jsonl"


def prompts_dir() -> Path:
    override = os.environ.get(PROMPTS_DIR_ENV)
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("tui-decode")) / "prompts"


def library(shipped: Path | None = None, folder: Path | None = None) -> tuple[list[LibraryPrompt], list[str]]:
    """(prompts, problems): the shipped prompts by group (copy-heavy first), then the user's files;
    each file that cannot be read is a problem line, not an error (the others stay usable)."""
    problems: list[str] = []
    prompts: list[LibraryPrompt] = []
    path = shipped or shipped_prompts_file()
    try:
        rows = load_prompts(path)
    except DecodeError as error:
        problems.append(str(error))
        rows = []
    rank = {g: i for i, g in enumerate(GROUP_ORDER)}
    for row in sorted(rows, key=lambda r: (rank.get(r.group, len(rank)), str(r.question_id))):
        prompts.append(LibraryPrompt(group_label(row.group), row.name, row.text))
    folder = folder or prompts_dir()
    try:
        files = sorted((p for p in folder.glob("*.txt") if p.is_file()), key=lambda p: p.stat().st_mtime,
                       reverse=True)[:MAX_USER_PROMPTS] if folder.is_dir() else []
    except OSError as error:
        problems.append(f"cannot list {folder}: {error.strerror or error}")
        files = []
    for file in files:
        try:
            prompts.append(LibraryPrompt("your prompts", file.stem, read_text(file, "prompt file", MAX_PROMPT_BYTES,
                                                                              "save it as UTF-8 text")))
        except (DecodeError, OSError) as error:
            problems.append(str(error))
    return prompts, problems
