"""`personae chain ...`: run declarative persona workflows (sequential and fan-out)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from personae.api.handover import MAX_CONCURRENCY
from personae.cli._options import (
    AddressOpt,
    ExecutorOpt,
    MaxCostOpt,
    MaxRequestsOpt,
    MaxTokensTotalOpt,
)
from personae.cli._preflight import before_run
from personae.errors import UsageError

if TYPE_CHECKING:
    from personae.lineage import Budget
    from personae.workflow.spec import Workflow

__all__ = ["app"]


def _steps_json(wf: Workflow, states: dict[str, Any]) -> list[dict[str, Any]]:
    """Every step of ``wf`` in order with its checkpoint state (``pending`` when none)."""
    rows = []
    for step in wf.steps():
        st = states.get(step.id, {})
        row = {"id": step.id, "persona": step.persona, "status": st.get("status", "pending")}
        for key in ("attempts", "duration", "handover", "error"):
            if st.get(key) is not None:
                row[key] = st[key]
        rows.append(row)
    return rows


def _state_dir(path: Path | None) -> Path | None:
    """``--state-dir`` may be missing (it is created) but must not be a file."""
    if path is not None and path.exists() and not path.is_dir():
        raise UsageError("not a folder", file=path, field="--state-dir")
    return path


def _caps(wf: Workflow, flags: tuple[int | None, int | None, float | None]) -> Budget:
    """The chain's caps from its flags, checked before any step runs (a cost cap needs a
    price for every step's model)."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.lineage import Budget
    from personae.project import Project
    from personae.settings import PersonaeSettings, chosen_model
    from personae.team.grouprun import group_caps

    calls, tokens, cost = flags
    default = chosen_model(wf.model, PersonaeSettings(), Project.open(wf.path.parent).config.model)
    models = [step.model or default[0] for step in wf.steps()]
    return group_caps(wf.path.parent, Budget(tokens=tokens, cost=cost, calls=calls), models)


def _export_group(root: Path, run_id: str) -> None:
    """Export the chain's own run (the root span of its steps' trace) when telemetry is on;
    each step's run exports itself from its own process."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.cli.run import export_trace
    from personae.project import Project
    from personae.settings import PersonaeSettings

    project = Project.open(root)
    endpoint = PersonaeSettings().otel_endpoint or project.config.otel_endpoint
    export_trace(project.state_db, run_id, endpoint)


def _check_steps(wf: Workflow) -> None:
    """Before any checkpoint or child: the workflow's folder is in a project (its steps run
    there; a folder never becomes a project by accident) and every step's persona is one
    a run there can use (an unknown name is one line naming the closest)."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.cli._root import NotInProjectError
    from personae.layout import find_root
    from personae.persona.preflight import check_models, check_personas

    folder = wf.path.parent.resolve()
    root = find_root(folder)
    if root is None:
        raise NotInProjectError(folder)
    check_personas(root, [(s.persona, wf.path, f"step {s.id!r} persona") for s in wf.steps()])
    models = [(s.model, wf.path, f"step {s.id!r} model") for s in wf.steps() if s.model]
    check_models(root, [*models, *([(wf.model, wf.path, "model")] if wf.model else [])])


app = typer.Typer(
    help="Chains: multi-step persona workflows with fan-out and resume.", no_args_is_help=True
)


@app.command("run")
def run(  # noqa: PLR0917
    workflow: Annotated[Path, typer.Argument(help="Workflow YAML file.")],
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue from the checkpoint; skip finished steps.")
    ] = False,
    concurrency: Annotated[
        int,
        typer.Option(
            "--concurrency", min=1, max=MAX_CONCURRENCY, help="Children at once in a fan-out."
        ),
    ] = 2,
    state_dir: Annotated[
        Path | None, typer.Option("--state-dir", help="Checkpoint/report directory.")
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="JSON lines: one per step event, then the outcome."),
    ] = False,
    executor: ExecutorOpt = "local",
    address: AddressOpt = None,
    max_requests: MaxRequestsOpt = None,
    max_tokens_total: MaxTokensTotalOpt = None,
    max_cost: MaxCostOpt = None,
) -> None:
    """Run a workflow; prints the aggregated report. Exit codes as `handover run`.

    The chain is a run of its own (`personae runs show RUN --tree`); the caps (flags, else
    the config's limits:) bound all its steps together."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.api.handover import ChainOptions, run_chain
    from personae.workflow.chain import check_resume
    from personae.workflow.engines import check_executor
    from personae.workflow.spec import load_workflow

    with before_run():  # a mistake in a flag or the workflow file: one line, exit 2
        wf = load_workflow(workflow)
        state_dir = _state_dir(state_dir)
        _check_steps(wf)
        check_executor(executor, address)
        if resume:
            check_resume(wf, state_dir)
        caps = _caps(wf, (max_requests, max_tokens_total, max_cost))

    def say(key: str, message: str) -> None:
        if as_json:
            typer.echo(json.dumps({"event": "step", "step": key, "message": message}))
        else:
            typer.echo(f"[{key}] {message}", err=True)

    options = ChainOptions(
        resume=resume, concurrency=concurrency, state_dir=state_dir, on_event=say,
        executor="ray" if executor == "ray" else "local", address=address,
    )  # fmt: skip
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.store.status import RunStatus
    from personae.team.grouprun import group_run

    # The chain is a run of its own: its steps' runs link to it (`runs show RUN --tree`).
    with group_run(wf.path.parent, f"chain {wf.name}", asked=caps) as group:
        outcome = run_chain(wf, options)
        group.status = {"success": RunStatus.DONE, "partial": RunStatus.PARTIAL}.get(
            outcome.status, RunStatus.FAILED
        )
    _export_group(wf.path.parent, group.run_id)
    if not as_json:
        typer.echo(f"chain run {group.run_id}; its tree: personae runs show {group.run_id} "
                   "--tree", err=True)  # fmt: skip
    if as_json:
        done = {
            "event": "done", "workflow": wf.name, "run": group.run_id, "status": outcome.status,
            "exit_code": outcome.exit_code, "report": str(outcome.report_path),
            "steps": _steps_json(wf, {k: asdict(v) for k, v in outcome.steps.items()}),
            "resumed": outcome.resumed,
        }  # fmt: skip
        typer.echo(json.dumps(done))
        raise typer.Exit(outcome.exit_code)
    typer.echo(outcome.report_path.read_text(encoding="utf-8"))
    typer.echo(f"report: {outcome.report_path}", err=True)
    raise typer.Exit(outcome.exit_code)


@app.command("status")
def status(
    workflow: Annotated[Path, typer.Argument(help="Workflow YAML file.")],
    state_dir: Annotated[
        Path | None, typer.Option("--state-dir", help="Checkpoint/report directory.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Show each step's state from the checkpoint."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.fsutil import read_regular
    from personae.workflow.chain import state_dir_for
    from personae.workflow.spec import load_workflow

    wf = load_workflow(workflow)
    state_dir = _state_dir(state_dir)
    cp = (state_dir or state_dir_for(wf)) / "checkpoint.json"
    if not cp.exists():
        if as_json:
            body = {"workflow": wf.name, "started": False, "steps": _steps_json(wf, {})}
            typer.echo(json.dumps(body, indent=2))
        else:
            typer.echo(f"{wf.name}: not started")
        return
    try:
        steps = json.loads(read_regular(cp).decode("utf-8"))["steps"]
    except (OSError, ValueError, KeyError) as exc:
        raise UsageError(f"unreadable checkpoint: {exc}", file=cp) from None
    if as_json:
        body = {"workflow": wf.name, "started": True, "steps": _steps_json(wf, steps)}
        typer.echo(json.dumps(body, indent=2))
        return
    for step in wf.steps():
        st = steps.get(step.id, {})
        typer.echo(f"{step.id:<20} {step.persona:<20} {st.get('status', 'pending')}")
