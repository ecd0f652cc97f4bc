"""Per-model calibration of token estimates from provider-reported usage.

After a call, the provider reports how many input tokens the prompt really
had. ``Calibration.calibrate(model, estimated_tokens, reported_input_tokens)``
moves the model's factor toward ``reported / raw`` (a running average, the
first reports weighing most) and persists it in the store (table
``token_calibration``). Later counters from ``counter_for_model(model,
calibration=...)`` multiply their raw estimate by the factor and still add the
safety margin on top, so a calibrated estimate stays on the high side.
The factor is bounded (``MIN_FACTOR`` .. ``MAX_FACTOR``) so one odd report
cannot make estimates useless. Exact tokenizers are never calibrated.

The request factor is a second, model-wide figure: the provider's reported input
tokens over our count of the same whole requests (every message, tool definition and
the chat framing), learned once per run from the run's calls
(:meth:`Calibration.calibrate_request`, the same running average and bounds) and kept
in the same table under the key ``request/<model>`` (a model key never holds ``/``).
It applies to exact and estimated counts alike, since a provider's chat template or
tokenizer can count more than ours whatever our counter is. :meth:`Calibration.narrowing`
turns it into a divisor of the context budget: ``1.0`` while the provider counts no
more than we do (the budget is never widened), at most :data:`MAX_NARROWING`.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Protocol

from personae.tokens.registry import model_info, normalize_model

__all__ = ["MAX_FACTOR", "MAX_NARROWING", "MIN_FACTOR", "Calibration", "CalibrationStore"]


class CalibrationStore(Protocol):
    """What calibration needs from a store (``personae.store.Store`` fits).

    A protocol, so that ``tokens`` does not import ``store`` (imports point
    from ``store`` to ``tokens``, never back); the SQL lives in ``store``.
    """

    def calibration_factors(self) -> dict[str, tuple[float, int]]:
        """``{model key: (factor, samples)}`` of every calibrated model."""
        ...

    def update_calibration(
        self, key: str, move: Callable[[float, int], float | None]
    ) -> tuple[float, int] | None:
        """Store ``move(factor, samples)`` for ``key`` in one write transaction
        (``None`` from ``move``: unchanged); returns the stored ``(factor, samples)``."""
        ...


MIN_FACTOR = 0.5
"""Lowest calibration factor (estimates at most halved)."""
MAX_FACTOR = 3.0
"""Highest calibration factor."""
MAX_NARROWING = 1.5
"""Most the request factor narrows a budget by (the budget keeps at least two thirds)."""
_MIN_WEIGHT = 0.2  # later reports still move the factor by at least 20% of the gap


def _moved(current: float, samples: int, observed: float, digits: int = 3) -> float | None:
    """``current`` moved toward ``observed`` (running average, bounded; ``None``: no move)."""
    weight = max(1.0 / (samples + 1), _MIN_WEIGHT)
    moved = current + weight * (observed - current)
    bounded = min(MAX_FACTOR, max(MIN_FACTOR, moved))
    return round(bounded, digits) if math.isfinite(moved) else None


class Calibration:
    """Calibration factors per model, persisted in a personae ``Store``."""

    def __init__(self, store: CalibrationStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._factors = store.calibration_factors()

    @staticmethod
    def key(model: str) -> str:
        """The storage key of ``model`` (lower-case, provider prefix dropped)."""
        return normalize_model(model)[1]

    def factor(self, model: str) -> float:
        """The current factor for ``model`` (1.0 when never calibrated)."""
        return self._factors.get(self.key(model), (1.0, 0))[0]

    def samples(self, model: str) -> int:
        """How many reports shaped the factor for ``model``."""
        return self._factors.get(self.key(model), (1.0, 0))[1]

    def calibrate(
        self,
        model: str,
        estimated_tokens: int,
        reported_input_tokens: int,
        *,
        used_factor: float | None = None,
    ) -> float:
        """Record one report and return the model's new factor.

        ``estimated_tokens`` is what ``counter_for_model(model,
        calibration=self).count(prompt)`` returned for the prompt the provider
        then reported as ``reported_input_tokens``; ``used_factor`` is that
        counter's ``factor`` (default: the current factor). Non-positive values
        and exact models leave the factor unchanged. The stored row is re-read
        inside the write transaction, so several processes can calibrate.
        """
        info = model_info(model)
        if info.exact or estimated_tokens <= 0 or reported_input_tokens <= 0:
            return 1.0 if info.exact else self.factor(model)
        key = self.key(model)

        def move(current: float, samples: int) -> float | None:
            used = used_factor if used_factor is not None and used_factor > 0 else current
            raw = estimated_tokens / (used * (1.0 + info.safety_margin))
            return _moved(current, samples, reported_input_tokens / raw, digits=2)

        with self._lock:
            stored = self._store.update_calibration(key, move)
            if stored is None:
                return self.factor(model)
            self._factors[key] = stored
        return stored[0]

    @staticmethod
    def request_key(model: str) -> str:
        """The storage key of ``model``'s request factor."""
        return f"request/{Calibration.key(model)}"

    def request_factor(self, model: str) -> tuple[float, int]:
        """``(provider / ours, runs seen)`` for ``model``'s whole requests (``(1.0, 0)``:
        never calibrated)."""
        return self._factors.get(self.request_key(model), (1.0, 0))

    def narrowing(self, model: str) -> float:
        """What ``model``'s context budget is divided by: the request factor when the
        provider counts more than we do, at most :data:`MAX_NARROWING`; else 1.0."""
        return min(MAX_NARROWING, max(1.0, self.request_factor(model)[0]))

    def calibrate_request(self, model: str, ours: int, reported: int) -> float:
        """Record that requests we counted as ``ours`` tokens in all were reported as
        ``reported``; returns the new request factor (unchanged when either is not
        positive)."""
        key = self.request_key(model)
        if ours <= 0 or reported <= 0:
            return self.request_factor(model)[0]
        with self._lock:
            stored = self._store.update_calibration(
                key, lambda current, samples: _moved(current, samples, reported / ours)
            )
            if stored is None:
                return self.request_factor(model)[0]
            self._factors[key] = stored
        return stored[0]
