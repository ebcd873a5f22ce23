"""A model family: the main model, an optional helper (draft) model, and their shared tokenizer.

`load_family` turns a `FamilySpec` (names and sources, cheap to build and to store in config;
`decoders.models.family_spec`) into a `Family` (loaded backends on one device, one dtype): the
torch load is `decoders.models.torch_family`, llama.cpp's `decoders.models.llamacpp_family`. torch
and transformers are imported inside the functions that need them, so that importing this module
stays instant and a UI can paint before the heavy libraries load.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from msgspec import UNSET

from decoders.core.errors import DecodeError
from decoders.core.events import LoadProgress
from decoders.models.drafts import Draft, TrainedHead, encode_draft, self_draft_kind
from decoders.models.family_spec import FamilySpec
from decoders.models.token_display import BYTE_TOKEN, byte_level_reader, visible_text
from decoders.records.family_info import FamilyInfo

if TYPE_CHECKING:
    import torch

    from decoders.backends.hf import Backend


# End-of-turn markers of common chat formats: a chat reply ends at these even when the
# generation config names only the base model's end-of-text token.
END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>")


@dataclass(eq=False)
class Family:
    """Loaded models sharing one tokenizer, plus what a decoder needs to know about them."""

    label: str
    main: Backend
    helper: Backend | None
    tokenizer: Any
    stop_ids: frozenset[int]
    device: torch.device
    dtype: torch.dtype
    main_source: str
    helper_source: str | None
    context_length: int
    vocab_size: int
    main_model: Any = None  # the transformers module behind `main` (shares its weights)
    helper_model: Any = None  # the helper's transformers module; None for self-draft or no helper
    draft: Draft | None = None  # what the helper is (`decoders.models.drafts`); None: no helper
    head: TrainedHead | None = None  # the trained head this family may draft with (its folder resolved)
    draft_choice: dict | None = None  # self_draft "fastest": what was measured and chosen (draft_choice.py)
    dtype_choice: dict | None = None  # dtype "fastest" on CPU: what was measured and chosen (dtype_choice.py)
    choice_note: str | None = None  # where those came from: kept on this machine, or measured (and why)
    choice_date: str | None = None  # the day they were measured (kept_choice.py)
    choice_reused: bool = False  # whether they were kept from an earlier load (nothing measured in this one)
    device_map: str | None = None  # how a device map spread the models ("auto", or "N entries")
    backend: str = "torch"  # what runs the models: "torch" or "llamacpp"
    stored_as: str | None = None  # llama.cpp: the weights' type as the GGUF stores them (e.g. "Q4_1")
    _display_table: list[str | None] = field(default_factory=list, init=False, repr=False)
    _token_bytes: Callable[[str], bytes | None] | None = field(default=None, init=False, repr=False)
    _special_ids: frozenset[int] = field(default=frozenset(), init=False, repr=False)

    @property
    def self_draft(self) -> str | None:
        """The kind of the draft built from the main model that the helper is ("int4", "head"), else None."""
        return self_draft_kind(self.draft)

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))

    def encode_prompt(self, text: str, chat_template: bool, history: Sequence[str] = ()) -> list[int]:
        """Prompt ids: one user message in the chat format, or the raw text.

        The chat template already writes any BOS it wants, so its text is encoded without
        adding special tokens; raw text gets the tokenizer's default special tokens.
        ``history``: the conversation before this message, user and assistant messages taking
        turns from the user's first (a later turn of a multi-turn question); raw text has them
        before it, a blank line between each two.
        """
        if chat_template and self.has_chat_template:
            roles = ("user", "assistant")
            messages = [{"role": roles[i % 2], "content": said} for i, said in enumerate(history)]
            messages.append({"role": "user", "content": text})
            rendered = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            return list(self.tokenizer(rendered, add_special_tokens=False)["input_ids"])
        return list(self.tokenizer("\n\n".join([*history, text]))["input_ids"])

    def answer_text(self, ids: Iterable[int]) -> str:
        """``ids`` as an assistant message for the next turn of a conversation: special tokens (the
        end of turn) left out."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def decode(self, ids: Iterable[int]) -> str:
        """The real text of ``ids`` (special tokens kept, no clean-up of spaces)."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def display(self, token_id: int) -> str:
        """One token as it should appear in a token strip: whitespace and control made visible.

        Newline is "↵", tab "→", carriage return "␍", other control bytes and bytes that are not
        complete UTF-8 "<0x..>"; a token made only of whitespace shows its spaces as "·";
        special tokens show as written (e.g. "<|im_end|>").
        """
        if not self._display_table:
            self._prepare_display()
        if 0 <= token_id < len(self._display_table):
            shown = self._display_table[token_id]
            if shown is None:
                shown = self._display_table[token_id] = self._render(token_id)
            return shown
        return f"<id {token_id}>"

    def describe(self) -> FamilyInfo:
        """What a run record needs to say which models produced it."""
        dtype = str(self.dtype).removeprefix("torch.")
        if dtype == "float16" and str(self.device) == "cpu":
            from decoders.backends.fp16_cpu import DESCRIPTION as dtype
        if self.backend != "torch":
            dtype = f"{self.stored_as or 'as stored'} (llama.cpp)"
        draft = encode_draft(self.draft) if self.draft is not None and self.helper is not None else None
        return FamilyInfo(
            label=self.label, main=self.main_source, helper=self.helper_source, device=str(self.device), dtype=dtype,
            draft=UNSET if draft is None else draft, device_map=self.device_map or UNSET,
            draft_choice=self.draft_choice["sentence"] if self.draft_choice else UNSET,
            dtype_choice=self.dtype_choice["sentence"] if self.dtype_choice else UNSET,
            choice_measured=self.choice_date or UNSET, backend=self.backend if self.backend != "torch" else UNSET)

    def _prepare_display(self) -> None:
        tokenizer = self.tokenizer
        self._special_ids = frozenset(
            set(getattr(tokenizer, "all_special_ids", ()) or ())
            | {i for i, tok in (getattr(tokenizer, "added_tokens_decoder", {}) or {}).items()
               if getattr(tok, "special", False)}
        )
        self._token_bytes = byte_level_reader(tokenizer)
        self._display_table = [None] * max(self.vocab_size, len(tokenizer))

    def _render(self, token_id: int) -> str:
        tokenizer = self.tokenizer
        if token_id >= len(tokenizer):
            return f"<id {token_id}>"  # an LM-head row the tokenizer has no token for
        raw = tokenizer.convert_ids_to_tokens(token_id)
        if token_id in self._special_ids or BYTE_TOKEN.match(raw or ""):
            return raw
        data = self._token_bytes(raw) if self._token_bytes else None
        if data is not None:
            text = data.decode("utf-8", "surrogateescape")
        elif raw and "\u2581" in raw:  # SentencePiece marks a space as "▁"
            text = raw.replace("\u2581", " ")
        else:
            text = tokenizer.decode([token_id], skip_special_tokens=False, clean_up_tokenization_spaces=False)
        return visible_text(text) if text else (raw or "∅")


def default_draft_layer(n_layers: int) -> int:
    """The early-exit layer a family without a helper drafts with unless told otherwise: two thirds
    of the way up the stack (layer 20 of SmolLM2-135M's 30), early enough to be cheap, late
    enough that its guesses sometimes agree with the full model."""
    return min(max((2 * n_layers) // 3, 1), n_layers - 1)


def load_family(spec: FamilySpec, progress: LoadProgress | None = None, fast: bool = True) -> Family:
    """Load the models of ``spec``. Every user-fixable problem raises a one-line DecodeError; an
    allocation that fails anywhere in the load or its timing (`memory.is_allocation_failure`) is
    one too, naming the memory the family needs and the way out."""
    report = rising(progress or (lambda message, fraction: None))
    if spec.backend != "torch":
        from decoders.models.llamacpp_family import load_llamacpp_family

        return load_llamacpp_family(spec, report)
    from decoders.models.torch_family import load_torch_family, out_of_memory

    loaded: dict[str, Any] = {}  # the main model once it is in memory: its size for the message
    try:
        return load_torch_family(spec, report, fast, loaded)
    except DecodeError:
        raise
    except Exception as err:
        from decoders.models.memory import is_allocation_failure

        if not is_allocation_failure(err):
            raise
        raise out_of_memory(spec, loaded.get("main_model")) from err


def rising(report: LoadProgress) -> LoadProgress:
    """``report``, its fraction held where it was when a step reports a lower one: the bar never
    goes back (each target's timing, then its drafts', report in turn)."""
    highest = 0.0

    def forward(message: str, fraction: float | None = None) -> None:
        nonlocal highest
        if fraction is not None:
            fraction = highest = max(fraction, highest)
        report(message, fraction)

    return forward


def stop_token_ids(model, tokenizer) -> frozenset[int]:
    """Ids that end a reply: the generation config's EOS id(s), the tokenizer's EOS, and the
    end-of-turn markers of common chat formats that the tokenizer knows as special tokens."""
    ids: set[int] = set()
    generation_config = getattr(model, "generation_config", None)
    eos = getattr(generation_config, "eos_token_id", None)
    ids.update([eos] if isinstance(eos, int) else (eos or []))
    if isinstance(getattr(tokenizer, "eos_token_id", None), int):
        ids.add(tokenizer.eos_token_id)
    special = set(getattr(tokenizer, "all_special_tokens", ()) or ())
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    special |= {str(tok) for tok in added.values() if getattr(tok, "special", False)}
    vocab = tokenizer.get_vocab()
    ids.update(vocab[tok] for tok in END_OF_TURN_TOKENS if tok in special and tok in vocab)
    return frozenset(int(i) for i in ids)


def context_length(model, tokenizer) -> int:
    """Positions the model was trained for, capped by the tokenizer's limit when it states one."""
    config = model.config
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    return context_length_of(int(getattr(text_config, "max_position_embeddings", 0) or 2048), tokenizer)


def context_length_of(length: int, tokenizer) -> int:
    """``length`` capped by the tokenizer's limit when it states one."""
    tokenizer_limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(tokenizer_limit, int) and 0 < tokenizer_limit < 1_000_000:
        length = min(length, tokenizer_limit)
    return length
