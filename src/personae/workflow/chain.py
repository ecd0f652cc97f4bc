"""Running a workflow: stages in order, fan-out within a stage, checkpoint after every step.

State lives in ``<workflow dir>/.personae/chains/<name>/`` (or ``state_dir``):
``checkpoint.json`` (rewritten atomically whenever a step starts or ends),
``handovers/<step>.json`` and the aggregated ``report.md`` / ``report.json``.
``resume=True`` continues after a crash or ``kill -9`` of the parent: finished
steps are not redone; a step whose child outlived the parent is waited for
and its results adopted when it succeeded.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from personae.errors import UsageError
from personae.fsutil import read_regular, write_atomic
from personae.handover._cast import persona_facts
from personae.handover.create import HandoverContent, build_handover, write_handover
from personae.handover.files import read_handover
from personae.handover.schema import ArtifactFile, HistoryEntry, now_iso
from personae.layout import Layout
from personae.procid import proc_stat
from personae.workflow._report import write_report
from personae.workflow.executors import Executor, Job, JobResult, LocalProcessExecutor
from personae.workflow.outcome import DONE as _DONE
from personae.workflow.outcome import ChainOutcome, StepState, StepStatus
from personae.workflow.spec import Step, Workflow

__all__ = ["ChainOutcome", "StepState", "check_resume", "execute_chain", "state_dir_for"]

_CLIP = 4000


def state_dir_for(workflow: Workflow) -> Path:
    """``<workflow dir>/.personae/chains/<name>``."""
    return Layout(workflow.path.parent).chains / workflow.name


class _Checkpoint:
    def __init__(self, path: Path, workflow: Workflow, steps: dict[str, StepState]) -> None:
        self.path = path
        self.workflow = workflow
        self.steps = steps
        self.lock = threading.Lock()

    def save(self) -> None:
        with self.lock:
            body = {
                "version": 1,
                "workflow": str(self.workflow.path),
                "workflowSha256": self.workflow.sha256,
                "updatedAt": now_iso(),
                "steps": {k: vars(v) for k, v in self.steps.items()},
            }
            self.path.parent.mkdir(parents=True, exist_ok=True)
            data = (json.dumps(body, indent=2) + "\n").encode("utf-8")
            write_atomic(self.path, data, mode=0o600)

    def update(self, key: str, **changes: Any) -> None:
        with self.lock:
            for name, value in changes.items():
                setattr(self.steps[key], name, value)
        self.save()

    @classmethod
    def load(cls, path: Path, workflow: Workflow) -> dict[str, StepState]:
        try:
            body = json.loads(read_regular(path).decode("utf-8"))
            if body.get("workflowSha256") != workflow.sha256:
                raise UsageError(
                    "the workflow changed since this checkpoint; "
                    "run without --resume to start over",
                    file=path,
                )
            return {k: StepState(**v) for k, v in body["steps"].items()}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"unreadable checkpoint: {exc}", file=path) from None


def _alive_child(pid: int | None, handover: str | None) -> bool:
    """Whether ``pid`` is still the child that ran ``handover`` (guards against pid reuse)."""
    if not pid or not handover:
        return False
    stat = proc_stat(pid)
    if stat is None or stat.state == "Z":
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return handover.encode() in cmdline


def _adopt(state: StepState, wait_limit: float) -> bool:
    """Wait for an orphaned child, then take its results if it succeeded."""
    deadline = time.monotonic() + wait_limit
    while _alive_child(state.pid, state.handover) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive_child(state.pid, state.handover) or not state.handover:
        return False
    try:
        results = read_handover(state.handover).handover.results
    except UsageError:
        return False
    if results is None or results.status not in _DONE:
        return False
    state.status = StepStatus(results.status)
    state.output = results.output
    state.artifacts = list(results.artifacts or [])
    state.next_steps = list(results.next_steps or [])
    state.finished_at = now_iso()
    state.adopted = True
    return True


def _make_handover(wf: Workflow, step: Step, states: dict[str, StepState], sdir: Path) -> Path:
    inputs = wf.inputs_of(step)
    by_id = {s.id: s for s in wf.steps()}
    history: list[HistoryEntry] = []
    files: list[ArtifactFile] = list(step.files)
    passed: dict[str, Any] = {}
    for key in inputs:
        st, src = states[key], by_id[key]
        output = (st.output or "")[:_CLIP]
        history.append(
            HistoryEntry(
                persona=src.persona,
                task=src.task[:_CLIP],
                summary=output,
                timestamp=st.finished_at or now_iso(),
            )
        )
        files += [
            ArtifactFile(path=a, type="document", description=f"produced by step {key}")
            for a in st.artifacts
        ]
        passed[key] = {"status": st.status, "output": output, "nextSteps": st.next_steps}
    data = {**step.data, "chain": {"workflow": wf.name, "step": step.id}, "inputs": passed}
    source = by_id[inputs[0]].persona if inputs else "chain"
    # The source step's persona's MCP servers travel as in any handover (names, entries
    # without secrets); the step's own run decides which it starts.
    servers = None
    if inputs:
        servers = persona_facts(wf.path.parent, source, step.persona, check_target=False)[0]
    handover = build_handover(
        source_persona=source,
        target_persona=step.persona,
        task=step.task,
        cwd=wf.path.parent,
        content=HandoverContent(
            session_id=f"chain:{wf.name}",
            files=files,
            data=data,
            insights=step.insights,
            history=history,
            mcp_server_configs=servers or None,
        ),
    )
    if step.profile is not None:
        handover.target.profile = step.profile
    path = sdir / "handovers" / f"{step.id}.json"
    with contextlib.suppress(UsageError):  # a rerun keeps the step's id: one ledger trail
        handover.handover_id = read_handover(path).handover.handover_id
    write_handover(handover, cwd=wf.path.parent, out=path, fmt="json")
    return path


def _apply(state: StepState, result: JobResult) -> dict[str, Any]:
    r = result.results
    return {
        "status": StepStatus(result.status),
        "pid": None,
        "finished_at": now_iso(),
        "attempts": state.attempts + result.attempts,
        "duration": round(result.duration, 3),
        "output": r.output if r else None,
        "error": result.error,
        "artifacts": list(r.artifacts or []) if r else [],
        "next_steps": list(r.next_steps or []) if r else [],
        "timed_out": result.timed_out,
    }


def check_resume(workflow: Workflow, state_dir: Path | None = None) -> None:
    """Refuse a checkpoint ``--resume`` could not continue (unreadable, or of a changed
    workflow) before anything starts: a :class:`UsageError` naming it."""
    cp_path = (state_dir or state_dir_for(workflow)) / "checkpoint.json"
    if cp_path.exists():
        _Checkpoint.load(cp_path, workflow)


def execute_chain(
    workflow: Workflow,
    *,
    resume: bool = False,
    concurrency: int = 2,
    executor: Executor | None = None,
    state_dir: Path | None = None,
    on_event: Callable[[str, str], None] | None = None,
) -> ChainOutcome:
    """Run ``workflow`` (or continue it with ``resume``); returns the outcome with its report."""
    sdir = state_dir or state_dir_for(workflow)
    cp_path = sdir / "checkpoint.json"
    say = on_event or (lambda _key, _msg: None)
    states = _Checkpoint.load(cp_path, workflow) if resume and cp_path.exists() else {}
    for step in workflow.steps():
        states.setdefault(step.id, StepState())
    cp = _Checkpoint(cp_path, workflow, states)
    resumed = [k for k, s in states.items() if s.status in _DONE]
    for key, st in states.items():
        if st.status is StepStatus.RUNNING:
            step = next(s for s in workflow.steps() if s.id == key)
            limit = (step.timeout or workflow.defaults.timeout) * 2
            if _adopt(st, limit):
                say(key, f"adopted results of a child that outlived the parent: {st.status}")
                resumed.append(key)
            else:
                st.status, st.pid = StepStatus.PENDING, None
        elif st.status in {StepStatus.FAILURE, StepStatus.SKIPPED}:
            st.status = StepStatus.PENDING
    cp.save()
    runner = executor or LocalProcessExecutor()
    failed = False
    for stage in workflow.stages:
        todo = [s for s in stage if states[s.id].status not in _DONE]
        if failed:
            for s in todo:
                cp.update(s.id, status=StepStatus.SKIPPED)
            continue
        jobs: list[Job] = []
        for step in todo:
            path = _make_handover(workflow, step, states, sdir)
            cp.update(step.id, status=StepStatus.RUNNING, handover=str(path), started_at=now_iso())
            jobs.append(
                Job(
                    key=step.id,
                    handover_path=path,
                    persona=step.persona,
                    cwd=workflow.path.parent,
                    timeout=step.timeout or workflow.defaults.timeout,
                    attempts=(
                        step.retries if step.retries is not None else workflow.defaults.retries
                    )
                    + 1,
                    backoff=workflow.defaults.backoff,
                    model=step.model or workflow.model,
                    num_cpus=step.num_cpus,
                    resources=dict(step.resources),
                )
            )
            say(step.id, f"start {step.persona}")

        def started(key: str, pid: int) -> None:
            cp.update(key, pid=pid)

        def finished(result: JobResult) -> None:
            cp.update(result.key, **_apply(states[result.key], result))
            say(result.key, f"{result.status} after {result.attempts} attempt(s)")

        runner.run(jobs, concurrency=concurrency, on_start=started, on_done=finished)
        failed = any(states[s.id].status not in _DONE for s in stage)
    outcome = ChainOutcome(
        workflow=workflow,
        state_dir=sdir,
        steps=states,
        report_path=sdir / "report.md",
        resumed=resumed,
    )
    write_report(outcome)
    return outcome
