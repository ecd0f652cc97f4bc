"""The one writer of a run's start and end in the store.

:func:`start_run` stores a run and its ``start`` event before its id is shown anywhere
(``personae run`` calls it before the team loads, the session when nobody did);
:func:`attach_run` records what the loaded team adds (the model) and keeps the run's
heartbeat; :func:`end_run` records how it ended: the row's status, answer, usage and
reason, and a ``final`` event when the run does not have one yet, so every ended run,
a failed or cancelled one too, ends with a ``final`` event. The first end wins; a later
one only adds a reason where none was recorded.

Light on purpose (no pydantic-ai): ``personae run`` stores its start before the heavy
imports.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from personae.store.runs import EventRow, RunStore
from personae.store.status import RunStatus
from personae.team.events import EventBus, RunFinished, RunStarted

__all__ = ["attach_run", "describe_failure", "end_run", "start_run"]


def _row(event: RunStarted | RunFinished) -> EventRow:
    raw = event.to_json_dict()
    return EventRow(event.seq, raw["kind"], event.at, event.message, None, raw["data"])


def start_run(
    runs: RunStore,
    *,
    task: str | None,
    persona: str | None,
    session: str | None,
    sandbox: str,
    context_from: Path | None = None,
    model: str = "-",
) -> RunStarted:
    """Store a new run (this process runs it) with its ``start`` event; returns the event
    (numbered 1, with the run's id)."""
    now = datetime.now(UTC)
    run_id = f"run-{now:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"
    event = RunStarted(
        run_id=run_id, seq=1, at=now.isoformat(timespec="milliseconds"),
        message=f"run {run_id} started", task=task, persona=persona, session=session,
        context_from=str(context_from) if context_from is not None else None, pid=os.getpid(),
        sandbox=sandbox,
    )  # fmt: skip
    runs.create(
        task=task or "", model=model, persona=persona, session_id=session, run_id=run_id,
        events=[_row(event)], heartbeat=False,
    )  # fmt: skip
    return event


def attach_run(runs: RunStore, started: RunStarted, *, task: str, model: str, session: str) -> None:
    """The loaded team takes over the stored run ``started``: its task, model and session
    are recorded, and a heartbeat says the run is alive until it ends."""
    runs.create(
        task=task, model=model, persona=started.persona, session_id=session,
        run_id=started.run_id,
    )  # fmt: skip


def describe_failure(exc: BaseException) -> tuple[RunStatus, str]:
    """How an exception ends a run: its status and a one-line reason (a failed connection
    names the URL it tried)."""
    # local import: asyncio loads only where a run does (CLI start-up)
    import asyncio

    if isinstance(exc, KeyboardInterrupt | asyncio.CancelledError):
        return RunStatus.CANCELLED, "interrupted (Ctrl-C or a signal)"
    if isinstance(exc, TimeoutError):
        return RunStatus.CANCELLED, "timed out"
    reason = str(exc) or type(exc).__name__
    url = _connection_url(exc)
    if url is not None and url not in reason:
        reason += f" (connecting to {url})"
    return RunStatus.FAILED, reason


def _connection_url(exc: BaseException) -> str | None:
    """The URL a failed connection tried, from anywhere in the exception's chain."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        try:
            request = getattr(current, "request", None)
            url = getattr(request, "url", None)
        except RuntimeError:  # httpx: an error without a request
            url = None
        if url is not None and "connect" in f"{type(current).__name__} {current}".lower():
            return str(url)
        current = current.__cause__ or current.__context__
    return None


def _final_of(runs: RunStore, run_id: str, bus: EventBus | None) -> tuple[RunStatus, str] | None:
    """The status and answer of the run's ``final`` event, if it has one."""
    if bus is not None:
        for event in bus.events:
            if isinstance(event, RunFinished):
                return event.status, event.message
        return None
    for stored in runs.events(run_id):
        if stored.kind == "final":
            return RunStatus(stored.data["status"]), stored.message
    return None


def end_run(
    runs: RunStore,
    run_id: str,
    *,
    status: RunStatus,
    reason: str | None = None,
    usage: Mapping[str, Any] | None = None,
    bus: EventBus | None = None,
) -> RunFinished | None:
    """Record that run ``run_id`` ended with ``status`` (``reason``: why it failed or was
    cancelled); returns the ``final`` event written, ``None`` when the run had one.

    A run that emitted its ``final`` event (the team's answer) only gets its row closed.
    Otherwise a ``final`` event with the status and reason is added: through ``bus`` when
    the run's bus is live (its listeners show it and the runtime stores it), else straight
    into the store after the last stored event. A run already ended keeps its status;
    ``reason`` is recorded only if none was.
    """
    record = runs.get(run_id)
    if record.status is not RunStatus.RUNNING:
        if reason:
            runs.settle(run_id, status=record.status, error=reason)
        return None
    totals = dict(usage or record.usage)
    ended = _final_of(runs, run_id, bus)
    if ended is not None:  # the team's answer: close the row with its status
        status, answer = ended
        runs.finish(run_id, status=status, final_text=answer, usage=totals, error=reason)
        return None
    made = RunFinished(  # no answer: its subtasks, warnings and files are in its events
        message=reason or status.value, status=status, subtasks=[], usage=totals,
        failure_count=0, warnings=[], files_written=[], error=reason,
    )  # fmt: skip
    if bus is not None:
        bus.emit(made)
        made = next(e for e in reversed(bus.events) if isinstance(e, RunFinished))
    else:
        last = max((e.seq for e in runs.events(run_id)), default=0)
        made = dataclasses.replace(
            made, run_id=run_id, seq=last + 1,
            at=datetime.now(UTC).isoformat(timespec="milliseconds"),
        )  # fmt: skip
        runs.add_events(run_id, [_row(made)])
    runs.finish(run_id, status=status, final_text="", usage=totals, error=reason)
    return made
