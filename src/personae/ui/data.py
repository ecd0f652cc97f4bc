"""What the viewer reads: runs, events and model calls from the store; chains from their folders.

Read through the store's repositories (:class:`~personae.store.runs.RunStore`);
the store is opened on first use, so ``personae ui`` can start before the
first run. Everything handed to the pages passes
:func:`personae.security.policy.redact_secrets` first.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from personae.context.report import stored_budget_json
from personae.errors import PersonaeError, UnknownNameError, UsageError
from personae.layout import Layout
from personae.persona._files import read_confined
from personae.persona.problems import Problem
from personae.pricing import PriceTable
from personae.project import Project
from personae.security.policy import redact_secrets
from personae.store.answers import ModelAnswer
from personae.store.db import Store
from personae.store.runs import ModelCallRecord, RunRecord, RunStatus, RunStore, StoredEvent
from personae.team.events import RunStarted
from personae.team.result import RunResult, result_of
from personae.telemetry.runtree import parse_time, typed
from personae.telemetry.usagetree import UsageNode, usage_tree
from personae.workflow.spec import load_workflow

__all__ = ["ChainStep", "ChainView", "Reader", "RunView"]

_LIST_LIMIT = 500


def _clean_run(run: RunRecord) -> RunRecord:
    return run.model_copy(
        update={
            "task": redact_secrets(run.task),
            "final_text": redact_secrets(run.final_text) if run.final_text else run.final_text,
        }
    )


def _clean_event(event: StoredEvent) -> StoredEvent:
    clean = {"message": redact_secrets(event.message), "data": redact_secrets(event.data)}
    return event.model_copy(update=clean)


def _clean_call(call: ModelCallRecord) -> ModelCallRecord:
    update: dict[str, Any] = {
        "context_text": redact_secrets(call.context_text),
        "budget": stored_budget_json(call.budget),
    }
    if call.answer is not None:  # redacted when stored; again here like everything shown
        update["answer"] = ModelAnswer.model_validate(redact_secrets(call.answer.model_dump()))
    return call.model_copy(update=update)


@dataclass(kw_only=True)
class RunView:
    """One run with its events and model calls (redacted)."""

    run: RunRecord
    events: list[StoredEvent]
    calls: list[ModelCallRecord]
    usage: UsageNode | None = None
    """The run and the runs it started in other processes, with their usage."""
    result: RunResult[str] | None = None
    """The run's result as its ``final`` event records it (the one the Python API
    returned and ``--json`` printed); ``None`` while it runs, when it crashed without
    one, or when a stored event is not readable (:attr:`unreadable` says which)."""
    unreadable: str | None = None
    """Why the result could not be read (a stored event this version cannot read)."""

    @property
    def signature(self) -> tuple[str, int, int]:
        """Changes whenever the run does (status, events, calls; the calls of the runs it
        started counted too): drives live updates."""
        calls = len(self.calls) if self.usage is None else max(
            len(self.calls), self.usage.total.calls
        )  # fmt: skip
        return (self.run.status, len(self.events), calls)

    @property
    def context_from(self) -> str | None:
        """The handover file the run continued, if any."""
        first = typed(self.events[0]) if self.events else None
        value = first.context_from if isinstance(first, RunStarted) else None
        return value if isinstance(value, str) and value else None


@dataclass(kw_only=True)
class ChainStep:
    """One step of a chain as its checkpoint records it."""

    id: str
    persona: str
    stage: int
    inputs: list[str]
    state: dict[str, Any]
    run_ids: list[str] = field(default_factory=list)
    """Runs that continued this step's handover file (oldest first)."""


@dataclass(kw_only=True)
class ChainView:
    """A chain's steps, stages and edges."""

    name: str
    folder: Path
    steps: list[ChainStep]
    updated_at: str
    problem: str | None = None
    """Why the workflow file could not be read (steps then come from the checkpoint only)."""


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except (OSError, ValueError, RuntimeError):
        return False
    return True


class Reader:
    """Read-only access to one project's runs and chains."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.db = Layout(self.root).state_db
        self._store: Store | None = None
        self._lock = threading.Lock()

    def _runs(self) -> RunStore | None:
        with self._lock:
            if self._store is None:
                if not _regular(self.db):
                    return None
                self._store = Store(self.db)
            return RunStore(self._store)

    def close(self) -> None:
        """Close the store, if it was opened."""
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    def run_store(self) -> RunStore | None:
        """The project's runs table access (``None`` before the first run)."""
        return self._runs()

    def runs(self) -> list[RunRecord]:
        """Recent runs, newest first (empty before the first run)."""
        runs = self._runs()
        if runs is None:
            return []
        return [_clean_run(r) for r in runs.list_runs(limit=_LIST_LIMIT)]

    def run(self, run_id: str) -> RunView:
        """One run in full; an unknown id raises the store's UnknownNameError."""
        runs = self._runs()
        if runs is None:
            raise UsageError("no runs stored here yet", file=self.db)
        record = runs.get(run_id)
        try:
            prices = Project.open(self.root).price_table()
        except PersonaeError:  # a bad config: costs unknown, the run is still shown
            prices = PriceTable()
        node = usage_tree(runs, record.id, prices)
        for item in node.walk():
            item.run = _clean_run(item.run)
        clean, events = _clean_run(record), [_clean_event(e) for e in runs.events(record.id)]
        try:
            result, unreadable = result_of(clean, events), None
        except ValueError as exc:
            result, unreadable = None, str(exc)
        return RunView(
            run=clean,
            events=events,
            calls=[_clean_call(c) for c in runs.model_calls(record.id)],
            usage=node,
            result=result,
            unreadable=unreadable,
        )

    def run_tokens(self, run: RunRecord) -> dict[str, Any]:
        """Usage of a run: the stored total, or (while it runs) the sum over its calls."""
        if run.usage or run.status != RunStatus.RUNNING:
            return run.usage
        runs = self._runs()
        total = {"input_tokens": 0, "output_tokens": 0}
        for call in runs.model_calls(run.id) if runs is not None else []:
            for key in total:
                value = call.usage.get(key)
                total[key] += value if isinstance(value, int) else 0
        return total

    def chain_names(self) -> list[str]:
        """Chains with a checkpoint under ``.personae/chains/``."""
        folder = Layout(self.root).chains
        if not folder.is_dir():
            return []
        return sorted(p.parent.name for p in folder.glob("*/checkpoint.json") if _regular(p))

    def chain(self, name: str) -> ChainView:
        """A chain's steps with their states, stages, inputs and runs."""
        names = self.chain_names()
        if name not in names:
            raise UnknownNameError("chain", name, names)
        folder = Layout(self.root).chains / name
        body = json.loads(self.read_text(folder / "checkpoint.json"))
        states: dict[str, Any] = body.get("steps") or {}
        steps, problem = self._workflow_steps(str(body.get("workflow", "")), states)
        starts = [parse_time(str(s.state.get("started_at") or "")) for s in steps]
        known = [t for t in starts if t is not None]
        owners = self._step_runs({s.persona for s in steps}, min(known) if known else None)
        for step in steps:
            handover = step.state.get("handover")
            if isinstance(handover, str):
                step.run_ids = owners.get(str(Path(handover).resolve()), [])
        return ChainView(
            name=name,
            folder=folder,
            steps=steps,
            updated_at=str(body.get("updatedAt", "")),
            problem=problem,
        )

    def _workflow_steps(
        self, workflow: str, states: dict[str, Any]
    ) -> tuple[list[ChainStep], str | None]:
        path = Path(workflow)
        problem: str | None = None
        if workflow and _regular(path) and _inside(path, self.root):
            try:
                wf = load_workflow(path)
            except PersonaeError as exc:
                problem = str(exc)
            else:
                return [
                    ChainStep(
                        id=s.id,
                        persona=s.persona,
                        stage=i,
                        inputs=wf.inputs_of(s),
                        state=redact_secrets(states.get(s.id, {})),
                    )
                    for i, stage in enumerate(wf.stages)
                    for s in stage
                ], None
        else:
            problem = f"workflow file not readable inside the project: {workflow or '-'}"
        ids = list(states)
        return [
            ChainStep(
                id=k,
                persona="?",
                stage=i,
                inputs=[ids[i - 1]] if i else [],
                state=redact_secrets(states[k]),
            )
            for i, k in enumerate(ids)
        ], problem

    def _step_runs(self, personas: set[str], since: datetime | None) -> dict[str, list[str]]:
        """Handover file (resolved) -> ids of the runs that continued it, oldest first.

        Only runs of the chain's personas that started after its first step are read.
        """
        runs = self._runs()
        found: dict[str, list[str]] = {}
        for run in reversed(runs.list_runs(limit=_LIST_LIMIT) if runs is not None else []):
            began = parse_time(run.started_at)
            if "?" not in personas and run.persona not in personas:
                continue
            if since is not None and began is not None and began < since:
                continue
            events = runs.events(run.id) if runs is not None else []
            first = typed(events[0]) if events else None
            source = first.context_from if isinstance(first, RunStarted) else None
            if isinstance(source, str) and source:
                found.setdefault(str(Path(source).resolve()), []).append(run.id)
        return found

    def read_text(self, path: Path) -> str:
        """A regular file inside the project (no FIFOs, devices or escapes), as text."""
        problems: list[Problem] = []
        text = read_confined(path, self.root, problems)
        if text is None:
            reason = problems[0].message if problems else "cannot be read"
            raise UsageError(reason, file=path)
        return text
