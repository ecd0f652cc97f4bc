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
"""

from __future__ import annotations

import math
import sqlite3
import threading
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Protocol

from personae.tokens.registry import model_info, normalize_model

__all__ = ["MAX_FACTOR", "MIN_FACTOR", "Calibration", "CalibrationStore"]


class CalibrationStore(Protocol):
    """What calibration needs from a store (``personae.store.Store`` fits).

    A protocol, so that ``tokens`` does not import ``store`` (imports point
    from ``store`` to ``tokens``, never back).
    """

    @property
    def conn(self) -> sqlite3.Connection:
        """The SQLite connection (migrated: has ``token_calibration``)."""
        ...

    @property
    def lock(self) -> AbstractContextManager[object]:
        """Serializes statements on ``conn``."""
        ...

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """A write transaction, all or nothing."""
        ...


MIN_FACTOR = 0.5
"""Lowest calibration factor (estimates at most halved)."""
MAX_FACTOR = 3.0
"""Highest calibration factor."""
_MIN_WEIGHT = 0.2  # later reports still move the factor by at least 20% of the gap


class Calibration:
    """Calibration factors per model, persisted in a personae ``Store``."""

    def __init__(self, store: CalibrationStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        with store.lock:
            rows = store.conn.execute("SELECT model, factor, samples FROM token_calibration")
            self._factors = {row[0]: (float(row[1]), int(row[2])) for row in rows}

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
        with self._lock, self._store.transaction() as conn:
            row = conn.execute(
                "SELECT factor, samples FROM token_calibration WHERE model = ?", (key,)
            ).fetchone()
            current, samples = (float(row[0]), int(row[1])) if row else (1.0, 0)
            used = used_factor if used_factor is not None and used_factor > 0 else current
            raw = estimated_tokens / (used * (1.0 + info.safety_margin))
            observed = reported_input_tokens / raw
            weight = max(1.0 / (samples + 1), _MIN_WEIGHT)
            moved = current + weight * (observed - current)
            if not math.isfinite(moved):
                return current
            new = round(min(MAX_FACTOR, max(MIN_FACTOR, moved)), 2)
            now = datetime.now(UTC).isoformat(timespec="milliseconds")
            conn.execute(
                "INSERT INTO token_calibration(model, factor, samples, updated)"
                " VALUES (?, ?, ?, ?) ON CONFLICT(model) DO UPDATE SET"
                " factor = excluded.factor, samples = excluded.samples,"
                " updated = excluded.updated",
                (key, new, samples + 1, now),
            )
            self._factors[key] = (new, samples + 1)
        return new
