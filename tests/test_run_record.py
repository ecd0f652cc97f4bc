"""One record of a run: one writer of its start and end (``personae.team.runlog``), one
status (``RunStatus``) with one exit code each, and a ``final`` event for every ended run,
a failed or cancelled one too; stores from before are upgraded (migration 0010) on SQLite
and PostgreSQL."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from _helpers import personae_cli
from personae.store.db import Store
from personae.store.runs import EventRow, RunStore
from personae.store.status import EXIT_PARTIAL, RunStatus
from personae.team.events import EventBus, RunFinished, RunStarted, event_from_json
from personae.team.runlog import end_run, start_run


def test_each_status_has_its_exit_code() -> None:
    codes = {s: s.exit_code for s in RunStatus}
    assert codes[RunStatus.DONE] == 0
    assert codes[RunStatus.FAILED] == codes[RunStatus.CRASHED] == 1
    assert codes[RunStatus.PARTIAL] == EXIT_PARTIAL == 5
    assert codes[RunStatus.CANCELLED] == 130
    assert 2 not in codes.values()  # bad usage: before any run


def test_a_failed_run_ends_with_a_final_event(open_store: Callable[[], Store]) -> None:
    with open_store() as store:  # SQLite and PostgreSQL
        runs = RunStore(store)
        started = start_run(runs, task="t", persona=None, session=None, sandbox="off")
        assert isinstance(started, RunStarted) and started.seq == 1 and (started.pid or 0) > 0
        final = end_run(runs, started.run_id, status=RunStatus.FAILED, reason="model gone")
        assert isinstance(final, RunFinished) and final.seq == 2
        assert (final.status, final.error) == (RunStatus.FAILED, "model gone")
        # A later end does not write a second final event nor change the status.
        assert end_run(runs, started.run_id, status=RunStatus.CANCELLED, reason="x") is None
        record = runs.get(started.run_id)
        assert (record.status, record.error) == (RunStatus.FAILED, "model gone")
        stored = runs.events(started.run_id)
        assert [e.kind for e in stored] == ["start", "final"]
        back = event_from_json({"run_id": started.run_id, **stored[1].model_dump()})
        assert isinstance(back, RunFinished) and back.status is RunStatus.FAILED


def test_a_run_that_answered_keeps_its_final_event(open_store: Callable[[], Store]) -> None:
    with open_store() as store:
        runs = RunStore(store)
        started = start_run(runs, task="t", persona=None, session=None, sandbox="off")
        bus = EventBus(started.run_id)
        bus.adopt(started)
        answer = RunFinished(
            message="42", status=RunStatus.PARTIAL, subtasks=[], usage={"requests": 2},
            failure_count=0, warnings=[], files_written=[], error=None,
        )  # fmt: skip
        bus.emit(answer)
        assert end_run(runs, started.run_id, status=RunStatus.PARTIAL, bus=bus) is None
        record = runs.get(started.run_id)
        assert (record.status, record.final_text, record.error) == (RunStatus.PARTIAL, "42", None)


def test_a_final_event_without_its_status_is_refused() -> None:
    raw = {"run_id": "r", "seq": 3, "kind": "final", "message": "m", "data": {"usage": {}}}
    with pytest.raises(ValueError, match=r"event 3 \(final\) of run r has no .*status"):
        event_from_json(raw)


def test_migration_0010_gives_old_ended_runs_a_final_event(
    open_store: Callable[[], Store],
) -> None:
    with open_store() as store:
        runs = RunStore(store)
        old = runs.create(task="t", model="m", heartbeat=False)
        runs.add_events(old, [EventRow(1, "start", "2026-01-01T00:00:00Z", "s", None, {})])
        runs.settle(old, status=RunStatus.FAILED, error="provider down")
        odd = runs.create(task="t", model="m", heartbeat=False)
        live = runs.create(task="t", model="m", heartbeat=False)
        with store.transaction() as conn:
            conn.execute("UPDATE runs SET status='error' WHERE id=?", (odd,))
            conn.execute("DELETE FROM schema_migrations WHERE number = 10")
    with open_store() as store:  # reopened: 0010 runs again
        runs = RunStore(store)
        (start, final) = runs.events(old)
        assert start.data == dict.fromkeys(
            ("task", "persona", "session", "context_from", "pid", "sandbox")
        )  # what the old version left out is there, as null
        back = event_from_json({"run_id": old, **start.model_dump()})
        assert isinstance(back, RunStarted) and back.pid is None
        assert (final.seq, final.kind, final.message) == (2, "final", "provider down")
        assert final.data["status"] == "failed" and final.data["error"] == "provider down"
        assert json.loads(json.dumps(final.data["usage"])) == {}
        record = runs.get(odd)
        assert record.status is RunStatus.FAILED
        assert record.error == "stored with an unknown status: error"
        assert [e.kind for e in runs.events(odd)] == ["final"]
        assert runs.events(live) == []  # still running: no end invented
        with store.transaction() as conn:  # applied twice: no second final event
            conn.execute("DELETE FROM schema_migrations WHERE number = 10")
    with open_store() as store:
        assert [e.kind for e in RunStore(store).events(old)] == ["start", "final"]


def test_a_failed_run_ends_with_a_final_event_in_json_and_exit_1(tmp_path: Path) -> None:
    root = tmp_path / "shop"
    assert personae_cli("init", str(root), cwd=tmp_path).returncode == 0
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    env = {"PERSONAE_MODEL": "openai:m", "OPENAI_BASE_URL": url}
    done = personae_cli("run", "Total March revenue", "--persona", "analyst", "--json",
                        cwd=root, env=env)  # fmt: skip
    assert done.returncode == RunStatus.FAILED.exit_code == 1
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[0]["kind"] == "start" and events[-1]["kind"] == "final"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    final = events[-1]["data"]
    assert final["status"] == "failed" and f"connecting to {url}" in final["error"]
    listed = json.loads(personae_cli("runs", "list", "--json", cwd=root).stdout)
    assert listed[0]["status"] == final["status"]
