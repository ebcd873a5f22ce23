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
