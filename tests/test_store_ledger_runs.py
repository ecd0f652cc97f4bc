"""The handover ledger and the run store on both backends (SQLite file, PostgreSQL server)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from personae.errors import UnknownNameError, UsageError
from personae.store import Store
from personae.store.handovers import HandoverLedger
from personae.store.runs import STALE_SECONDS, EventRow, RunStore


def _created(ledger: HandoverLedger, handover_id: str, **extra: str) -> None:
    ledger.record_created(
        handover_id=handover_id,
        path=Path(f"/tmp/{handover_id}.yaml"),
        file_hash=extra.get("file_hash", "h1"),
        source_persona="lead",
        target_persona="researcher",
        task="look it up",
    )


def test_ledger_records_create_events_and_a_terminal_result(
    open_store: Callable[[], Store],
) -> None:
    with open_store() as store:
        ledger = HandoverLedger(store)
        _created(ledger, "ho-20260101-aaaa")
        _created(ledger, "ho-20260101-bbbb")
        ledger.record_event("ho-20260101-aaaa", "started", status="running")
        ledger.record_event("ho-20260101-aaaa", "attempt", detail="1")
        ledger.record_event(
            "ho-20260101-aaaa", "result", status="failure", detail="boom", file_hash="h2"
        )
        entry = ledger.get("ho-20260101-aaaa")
        assert entry is not None
        assert (entry.status, entry.error, entry.file_hash) == ("failure", "boom", "h2")
        assert entry.finished_at is not None and entry.finished_at.endswith("Z")
        assert [e.event for e in ledger.events("ho-20260101-aaaa")] == [
            "created",
            "started",
            "attempt",
            "result",
        ]
        assert ledger.get("ho-20260101-b") is not None  # a unique prefix
        assert ledger.get("ho-20260101-") is None  # ambiguous
        assert ledger.get("ho_2026%") is None  # LIKE wildcards are literal
        assert [e.handover_id for e in ledger.recent()] == [
            "ho-20260101-bbbb",
            "ho-20260101-aaaa",
        ]
        assert [e.handover_id for e in ledger.recent(status="failure")] == ["ho-20260101-aaaa"]
        # A row created elsewhere is inserted once; an existing row is left alone.
        ledger.ensure(handover_id="ho-20260101-aaaa", path=Path("/x"), file_hash="other",
                      source_persona="a", target_persona="b", task="t")  # fmt: skip
        ledger.ensure(handover_id="ho-20260101-cccc", path=Path("/x"), file_hash="c",
                      source_persona="a", target_persona="b", task="t")  # fmt: skip
        assert ledger.get("ho-20260101-aaaa").file_hash == "h2"  # type: ignore[union-attr]
        assert ledger.get("ho-20260101-cccc").status == "created"  # type: ignore[union-attr]


def test_runs_events_calls_and_finish(open_store: Callable[[], Store]) -> None:
    with open_store() as store:
        runs = RunStore(store)
        start = EventRow(1, "start", "2026-01-01T00:00:00+00:00", "go", None, {"a": 1})
        run_id = runs.create(task="t", model="scripted:x", events=[start], heartbeat=False)
        # The start event comes again from the bus: stored once.
        runs.add_events(run_id, [start, EventRow(2, "step", "t2", "m", 3, {"b": [1, 2]})])
        runs.add_model_call(run_id, role="worker", model="m", context_text="ctx",
                            budget={"used": 5}, usage={"requests": 1}, subtask=3)  # fmt: skip
        runs.finish(run_id, status="done", final_text="answer", usage={"requests": 1})
        runs.settle(run_id, status="cancelled", error="late")  # finished: status kept
        record = runs.get(run_id)
        assert (record.status, record.final_text, record.error) == ("done", "answer", "late")
        assert record.usage == {"requests": 1} and record.pid is not None
        assert [(e.seq, e.kind, e.data) for e in runs.events(run_id)] == [
            (1, "start", {"a": 1}),
            (2, "step", {"b": [1, 2]}),
        ]
        (call,) = runs.model_calls(run_id)
        assert (call.seq, call.subtask, call.budget) == (1, 3, {"used": 5})
        # Re-creating the announced id keeps its start time and events.
        again = runs.create(task="t", model="scripted:x", run_id=run_id, heartbeat=False)
        assert again == run_id and runs.get(run_id).started_at == record.started_at
        assert len(runs.events(run_id)) == 2


def test_secrets_are_redacted_before_a_run_is_stored(open_store: Callable[[], Store]) -> None:
    key = "sk-ant-api03-" + "A" * 60
    token = "ghp_" + "a1" * 18
    with open_store() as store:
        runs = RunStore(store)
        event = EventRow(1, "tool_call", "t1", f"ran with {key}", None, {"args": {"t": token}})
        run_id = runs.create(task=f"deploy with {key}", model="m", events=[event], heartbeat=False)
        runs.add_model_call(run_id, role="worker", model="m", context_text=f"<task>{key}</task>",
                            budget={"note": token}, usage={}, subtask=None)  # fmt: skip
        runs.finish(run_id, status="failed", final_text=f"used {token}", usage={}, error=key)
        record = runs.get(run_id)
        (call,) = runs.model_calls(run_id)
        (stored,) = runs.events(run_id)
        texts = [record.task, record.final_text, record.error, call.context_text,
                 str(call.budget), stored.message, str(stored.data)]  # fmt: skip
        for text in texts:
            assert key not in str(text) and token not in str(text)
            assert "[REDACTED:" in str(text)
        assert record.task == "deploy with [REDACTED:anthropic-key]"


def test_run_ids_prefixes_order_and_crashed_runs(open_store: Callable[[], Store]) -> None:
    with open_store() as store:
        runs = RunStore(store)
        first = runs.create(task="a", model="m", run_id="run-x-1", heartbeat=False)
        second = runs.create(task="b", model="m", run_id="run-x-2", heartbeat=False)
        assert [r.id for r in runs.list_runs()] == [second, first]
        assert runs.get("run-x-2").task == "b"
        with pytest.raises(UsageError, match="ambiguous"):
            runs.get("run-x")
        with pytest.raises(UnknownNameError):
            runs.get("nope")
        # A row of another host without a heartbeat for too long is crashed.
        with store.transaction() as conn:
            conn.execute("UPDATE runs SET host = ? WHERE id = ?", ("elsewhere", first))
        later = datetime.now(UTC) + timedelta(seconds=STALE_SECONDS + 60)
        assert runs.reconcile(now=later) == [first]
        crashed = runs.get(first)
        assert crashed.status == "crashed" and "no heartbeat" in (crashed.error or "")
        assert runs.get(second).status == "running"  # this process is alive
