"""The run's context budget, narrowed when the provider counts more than we do.

Before a run, the model's budget (its share of the window) is divided by the model's
request calibration (:meth:`personae.tokens.Calibration.narrowing`: 1.0 until the
provider has counted more than our count of the same requests, at most 1.5); the
budget report says so in a warning. After the run, the provider's input tokens and
ours, summed over the calls where the provider reported a figure, move that
calibration one step (:meth:`personae.tokens.Calibration.calibrate_request`).
"""

from __future__ import annotations

from collections.abc import Mapping

from personae.context.budget import Budget
from personae.tokens.calibration import Calibration, CalibrationStore

__all__ = ["calibrated_budget", "learn_from_run"]


def calibrated_budget(
    store: CalibrationStore, model: str, window: int, share: float
) -> tuple[Budget, str | None]:
    """``share`` of ``window`` for ``model``, narrowed by its calibration; and the note
    that says so (``None`` when not narrowed)."""
    calibration = Calibration(store)
    narrowing = calibration.narrowing(model)
    if narrowing <= 1.0:
        return Budget.of_window(window, share), None
    factor, runs = calibration.request_factor(model)
    budget = Budget.of_window(window, share / narrowing)
    note = (
        f"budget narrowed to {budget.tokens:,} tokens ({share:.0%} of the window / "
        f"{narrowing:.2f}): the provider of {model} counted {factor:.2f}x our count of "
        f"the same requests (calibrated over {runs} run(s))"
    )
    return budget, note


def learn_from_run(store: CalibrationStore, counts: Mapping[str, tuple[int, int]]) -> None:
    """One calibration step per model from a run's ``{model: (provider's, ours)}``."""
    if not counts:
        return
    calibration = Calibration(store)
    for model, (reported, ours) in counts.items():
        calibration.calibrate_request(model, ours, reported)
