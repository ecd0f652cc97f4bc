"""Calibration from provider-reported input tokens: persisted, bounded, margin kept.

Every test runs on a SQLite file and on a real PostgreSQL server."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from _tokens_corpus import corpus
from personae.store import Store
from personae.tokens import EstimateCounter, counter_for_model
from personae.tokens.calibration import MAX_FACTOR, MIN_FACTOR, Calibration

MODEL = "anthropic:claude-sonnet-4-5"


def _estimate(calibration: Calibration, text: str) -> int:
    return counter_for_model(MODEL, calibration=calibration).count(text)


def test_calibrated_estimate_moves_toward_reported_count(open_store: Callable[[], Store]) -> None:
    text = corpus()["markdown:tiktoken"]
    with open_store() as store:
        calibration = Calibration(store)
        first = _estimate(calibration, text)
        reported = int(first * 0.6)  # the provider says the prompt was smaller
        gaps = []
        for _ in range(12):
            estimate = _estimate(calibration, text)
            gaps.append(estimate - reported)
            calibration.calibrate(MODEL, estimate, reported)
        final = _estimate(calibration, text)
        assert gaps[0] > gaps[-1] >= 0  # moved toward the report, monotonically closer
        assert all(a >= b for a, b in itertools.pairwise(gaps))
        # Margin kept: the calibrated estimate still sits above the report.
        plain = counter_for_model(MODEL)
        assert isinstance(plain, EstimateCounter)
        margin = plain.safety_margin
        assert reported <= final <= reported * (1 + margin) * 1.05 + 2
        counter = counter_for_model(MODEL, calibration=calibration)
        assert isinstance(counter, EstimateCounter)
        assert counter.factor < 1.0
        assert counter.name.startswith("estimate:claude@x")


def test_calibration_moves_up_when_reports_are_larger(open_store: Callable[[], Store]) -> None:
    text = corpus()["prose"]
    with open_store() as store:
        calibration = Calibration(store)
        estimate = _estimate(calibration, text)
        reported = estimate * 2
        new = calibration.calibrate(MODEL, estimate, reported)
        assert new > 1.0
        assert _estimate(calibration, text) >= reported


def test_calibration_persists_in_the_store(open_store: Callable[[], Store]) -> None:
    with open_store() as store:
        calibration = Calibration(store)
        factor = calibration.calibrate("claude-opus-4-1", 1000, 700)
        assert calibration.samples("anthropic:claude-opus-4-1") == 1
    with open_store() as store:
        again = Calibration(store)
        assert again.factor("claude-opus-4-1") == factor != 1.0
        assert again.factor("ANTHROPIC:claude-opus-4-1") == factor
        assert again.factor("claude-sonnet-4-5") == 1.0
        with store.read() as conn:
            row = conn.execute("SELECT model, samples FROM token_calibration").fetchone()
        assert tuple(row) == ("claude-opus-4-1", 1)


def test_factor_is_bounded(open_store: Callable[[], Store]) -> None:
    with open_store() as store:
        calibration = Calibration(store)
        for _ in range(10):
            calibration.calibrate("gemini-2.5-pro", 100, 100_000)
        assert calibration.factor("gemini-2.5-pro") == MAX_FACTOR
        for _ in range(30):
            calibration.calibrate("llama3.1", 100_000, 1)
        assert calibration.factor("llama3.1") == MIN_FACTOR


def test_exact_models_and_bad_reports_are_ignored(open_store: Callable[[], Store]) -> None:
    with open_store() as store:
        calibration = Calibration(store)
        assert calibration.calibrate("gpt-4o", 100, 200) == 1.0
        assert counter_for_model("gpt-4o", calibration=calibration).name == "o200k_base"
        assert calibration.calibrate(MODEL, 0, 100) == 1.0
        assert calibration.calibrate(MODEL, 100, -5) == 1.0
        with store.read() as conn:
            count = conn.execute("SELECT COUNT(*) FROM token_calibration").fetchone()[0]
        assert count == 0


def test_two_calibrations_on_one_database_share_reports(open_store: Callable[[], Store]) -> None:
    """A second handle (another process, in effect) sees and builds on earlier reports."""
    with open_store() as first_store, open_store() as second_store:
        first = Calibration(first_store)
        second = Calibration(second_store)
        first.calibrate(MODEL, 1200, 500)
        after_first = first.factor(MODEL)
        counter = counter_for_model(MODEL, calibration=first)
        assert isinstance(counter, EstimateCounter)
        second.calibrate(MODEL, 1200, 500, used_factor=1.0)
        assert second.samples(MODEL) == 2  # re-read inside the transaction
        assert second.factor(MODEL) <= after_first
        assert Calibration(first_store).samples(MODEL) == 2


def test_documented_feedback_loop_works_for_any_model(open_store: Callable[[], Store]) -> None:
    """The loop from docs/tokens.md, for an exact and an estimated model."""
    prompt = corpus()["markdown:technical"]
    with open_store() as store:
        calibration = Calibration(store)
        for model, reported in (("gpt-4o", 305), (MODEL, 300)):
            counter = counter_for_model(model, calibration=calibration)
            estimate = counter.count(prompt)
            factor = getattr(counter, "factor", None)
            assert factor is not None
            calibration.calibrate(model, estimate, reported, used_factor=factor)
        assert calibration.factor("gpt-4o") == 1.0
        assert calibration.factor(MODEL) < 1.0
