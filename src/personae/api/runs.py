"""Stored runs from Python: replay one, compare two, diff two calls' assembled contexts.

The same code paths as ``personae runs replay|compare|diff``::

    from personae import compare_runs, diff_calls, replay_run

    replay = replay_run("run-2026...", model="openai:gpt-4o-mini", from_call=2)
    print(compare_runs(replay.link.of, replay.run_id).first_difference)
    print(diff_calls(f"{replay.run_id}:1", f"{replay.run_id}:2").changed)

``root`` is a folder inside the project (the project is found as the CLI finds it). Bad
input (an unknown run or call, a bad file, a model spec that does not resolve) raises
:class:`~personae.errors.UsageError` before anything is stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from personae.context.diff import ContextDiff
from personae.context.diff import diff_calls as _diff_calls
from personae.errors import UsageError
from personae.project import Project
from personae.store.db import Store, store_present
from personae.store.runs import RunStore
from personae.team.compare import Comparison
from personae.team.compare import compare_runs as _compare_runs
from personae.team.replay import ReplayRequest, ReplayResult
from personae.team.replay import replay_run as _replay_run

__all__ = ["areplay_run", "compare_runs", "diff_calls", "replay_run"]


@contextmanager
def _runs(root: str | Path) -> Iterator[RunStore]:
    project = Project.discover(root)
    if not store_present(project.state_db):
        raise UsageError("no runs stored here yet (run a task first)", file=project.state_db)
    with Store(project.state_db) as store:
        runs = RunStore(store)
        runs.reconcile()
        yield runs


async def areplay_run(
    run_id: str,
    *,
    root: str | Path = ".",
    model: str | None = None,
    persona_prompt: str | Path | None = None,
    from_call: int = 1,
) -> ReplayResult:
    """Replay a stored run as a new run linked to it (``personae runs replay``): calls
    before ``from_call`` are answered from the record, the rest go to ``model`` (default:
    the run's) with the persona prompt read from ``persona_prompt`` (default: the run's)."""
    project = Project.discover(root)
    request = ReplayRequest(
        run_id=run_id,
        model=model,
        persona_prompt=Path(persona_prompt) if persona_prompt is not None else None,
        from_call=from_call,
    )
    return await _replay_run(project.root, request)


def replay_run(
    run_id: str,
    *,
    root: str | Path = ".",
    model: str | None = None,
    persona_prompt: str | Path | None = None,
    from_call: int = 1,
) -> ReplayResult:
    """:func:`areplay_run` from synchronous code (not inside a running event loop)."""
    return asyncio.run(areplay_run(run_id, root=root, model=model,
                                   persona_prompt=persona_prompt, from_call=from_call))  # fmt: skip


def compare_runs(run_a: str, run_b: str, *, root: str | Path = ".") -> Comparison:
    """Two stored runs side by side, call by call (``personae runs compare``); print
    :func:`personae.team.compare.render_comparison` of it for the text view."""
    with _runs(root) as runs:
        return _compare_runs(runs, run_a, run_b)


def _ref(text: str) -> tuple[str, int]:
    run, _, call = text.rpartition(":")
    if not run or not call.isdigit() or int(call) < 1:
        raise UsageError(f"{text!r} is not RUN:CALL (a run id and a call number, e.g. run-1:2)")
    return run, int(call)


def diff_calls(call_a: str, call_b: str, *, root: str | Path = ".") -> ContextDiff:
    """What changed in the assembled context between two stored model calls, each given as
    ``RUN:CALL`` (``personae runs diff``)."""
    with _runs(root) as runs:
        return _diff_calls(runs, _ref(call_a), _ref(call_b))
