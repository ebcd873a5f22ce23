"""A load's progress moves through what takes the time (the load, the fast backend's preparation,
the warm-up), never backwards, and ends at 1.0: no bar that sits at one value while the work goes on."""

from __future__ import annotations

from decoders.models.families import FamilySpec
from decoders.models.family import load_family
from tests.support.tiny import save_tiny_model


def test_a_load_reports_each_step_in_order(tmp_path):
    folder = save_tiny_model(tmp_path / "tiny", vocab=64, layers=3)
    seen: list[tuple[str, float | None]] = []
    load_family(FamilySpec(name="tiny", main=str(folder), device="cpu", dtype="float32"),
                lambda message, fraction: seen.append((message, fraction)))
    fractions = [f for _, f in seen if f is not None]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert len(set(fractions)) >= 4, seen  # load, backend, warm-up, ready
    messages = " | ".join(m for m, _ in seen)
    assert "fast backend" in messages and "Warming up" in messages and messages.endswith("Models ready")


# -- a first load's GGUF conversion ------------------------------------------------------------------
def convert_tiny_gguf(tmp_path, monkeypatch) -> list[tuple[str, float]]:
    """The progress reports of converting a tiny GGUF for real (through transformers)."""
    from decoders.models import gguf_cache
    from tests.support.tiny_gguf import write_tiny_gguf

    monkeypatch.setenv(gguf_cache.CACHE_ENV, str(tmp_path / "cache"))
    path = write_tiny_gguf(tmp_path / "tiny.gguf")
    seen: list[tuple[str, float]] = []
    gguf_cache.ensure_converted(path, lambda message, fraction: seen.append((message, fraction)))
    assert gguf_cache.is_converted(path)
    return seen


def test_a_gguf_conversion_moves_the_bar_through_every_step_before_the_tensors(tmp_path, monkeypatch):
    """The first load of the bundled model sat at 18% for 49 s: transformers parses the GGUF's
    metadata three times, builds the model and maps its tensor names before the one step its own
    bar covered (the tensors). Each of those steps now reports, at a fraction above the last."""
    seen = convert_tiny_gguf(tmp_path, monkeypatch)
    fractions = [fraction for _, fraction in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    first_tensor = next(i for i, (message, _) in enumerate(seen) if message.startswith("Dequantising tensors"))
    before = sorted(set(fractions[:first_tensor]))
    assert len(before) >= 8, seen[:first_tensor]  # before: 0.0 and 0.2 only
    messages = [message for message, _ in seen]
    order = ["Reading the tokenizer of tiny.gguf: parsing its metadata", "building it from the GGUF's vocabulary",
             "parsing its config", "building the model", "parsing its tensor index", "mapping tensor names (1/",
             "Dequantising tensors (1/", "Saving a converted copy", "Converted tiny.gguf"]
    at = [next(i for i, message in enumerate(messages) if step in message) for step in order]
    assert at == sorted(at), list(zip(order, at, strict=True))


def test_a_quiet_step_of_the_conversion_says_how_long_it_has_taken(tmp_path, monkeypatch):
    """Parsing the metadata is one call inside transformers (9 s each on a loaded machine): while
    it goes on, the step is reported again with its seconds."""
    import time

    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    from decoders.models.hf_progress import GGUFProgress

    original = gguf_utils.load_gguf_checkpoint

    def slow(path, return_tensors=False, *args, **kwargs):
        if not return_tensors:
            time.sleep(0.5)
        return original(path, return_tensors, *args, **kwargs)

    monkeypatch.setattr(gguf_utils, "load_gguf_checkpoint", slow)
    monkeypatch.setattr(GGUFProgress, "HEARTBEAT", 0.1)
    seen = convert_tiny_gguf(tmp_path, monkeypatch)
    config = [(message, fraction) for message, fraction in seen if "parsing its config" in message]
    assert len(config) >= 3, seen  # the step, then at least two reports of its seconds
    assert config[-1][0].startswith("Dequantising tiny.gguf (first load only): parsing its config … ")
    assert config[-1][0].endswith(" s") and len({fraction for _, fraction in config}) == 1
    assert gguf_utils.load_gguf_checkpoint is slow  # the wrapping is undone after the conversion
