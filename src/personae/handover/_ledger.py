"""Best-effort ledger writes for the run flow (never fail a run over the audit trail)."""

from __future__ import annotations

from pathlib import Path
from typing import Unpack

from personae.errors import PersonaeError
from personae.handover.schema import ContextHandover
from personae.store.db import STORE_ERRORS
from personae.store.handovers import EventNotes, HandoverLedger

__all__ = ["ledger_event"]


def ledger_event(
    db: Path | None, h: ContextHandover, event: str, *, path: Path, **notes: Unpack[EventNotes]
) -> str | None:
    """Record ``event`` for ``h`` in the ledger at ``db``; returns a warning on failure."""
    if db is None:
        return None
    try:
        ledger = HandoverLedger.open(db)
        try:
            ledger.ensure(
                handover_id=h.handover_id,
                path=path,
                file_hash=notes.get("file_hash") or "",
                source_persona=h.source.persona,
                target_persona=h.target.persona,
                task=h.target.task,
            )
            ledger.record_event(h.handover_id, event, path=path, **notes)
        finally:
            ledger.close()
    except (*STORE_ERRORS, OSError, PersonaeError) as exc:
        return f"handover ledger not updated ({db}): {exc}"
    return None
