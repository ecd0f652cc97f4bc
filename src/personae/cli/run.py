"""`personae run`, `personae demo` and `personae runs ...`."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from personae.errors import PersonaeError

if TYPE_CHECKING:
    from personae.team.events import Event
    from personae.team.session import RunOptions, RunOutcome

__all__ = ["register", "runs_app"]

runs_app = typer.Typer(help="Stored runs and their events.", no_args_is_help=True)

_STYLES = {
    "title": "bold",
    "plain": "",
    "tool": "cyan",
    "good": "green",
    "bad": "red",
    "warn": "yellow",
    "note": "dim",
    "answer": "bold green",
}


class _View:
    """Prints events as they arrive: rich lines, or one JSON object per line."""

    def __init__(self, *, as_json: bool, explain: bool = False) -> None:
        from rich.console import Console

        self.as_json = as_json
        self.explain = explain
        self.console = Console(highlight=False, soft_wrap=True)
        self.seen: set[str] = set()
        self.status: Any = None

    def __call__(self, event: Event) -> None:
        if self.as_json:
            sys.stdout.write(json.dumps(event.to_json_dict()) + "\n")
            sys.stdout.flush()
            return
        from rich.text import Text

        from personae.team.render import describe

        for style, text in describe(event, explain=self.explain, seen=self.seen):
            self.console.print(Text(text, style=_STYLES.get(style, "")))
        if self.status is not None:
            where = f" (subtask {event.subtask})" if event.subtask else ""
            self.status.update(f"working{where}: last step {event.kind.value}")


def _execute(
    task: str, options: RunOptions, view: _View, timeout: float | None = None
) -> RunOutcome:
    from personae.team.session import run_turn

    async def go() -> RunOutcome:
        coro = run_turn(task, options, listeners=[view])
        return await (asyncio.wait_for(coro, timeout) if timeout is not None else coro)

    if view.as_json or not view.console.is_terminal:
        return asyncio.run(go())
    with view.console.status("planning...") as status:
        view.status = status
        try:
            return asyncio.run(go())
        finally:
            view.status = None


def _announce(
    *,
    as_json: bool,
    task: str | None,
    persona: str | None,
    session: str | None,
    context_from: Path | None,
) -> dict[str, Any]:
    """Show the run's ``start`` event now (stdlib only) and return it (JSON form, seq 1)."""
    import os
    import secrets
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    run_id = f"run-{now:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"
    event: dict[str, Any] = {
        "run_id": run_id,
        "seq": 1,
        "kind": "start",
        "at": now.isoformat(timespec="milliseconds"),
        "message": f"run {run_id} started",
        "subtask": None,
        "data": {
            "task": task,
            "persona": persona,
            "session": session,
            "context_from": str(context_from) if context_from is not None else None,
            "pid": os.getpid(),
        },
    }
    line = json.dumps(event) if as_json else f"Run {run_id} started; loading the team ..."
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    return event


def register(app: typer.Typer) -> None:
    """Add ``run`` and ``demo`` to the main app."""

    @app.command("run")
    def run(  # noqa: PLR0917
        task: Annotated[str | None, typer.Argument(help="What the team should do.")] = None,
        persona: Annotated[str | None, typer.Option(help="Active persona.")] = None,
        model: Annotated[
            str | None, typer.Option(help="provider:name (e.g. openai:gpt-4o, ollama:llama3).")
        ] = None,
        session: Annotated[
            str | None, typer.Option(help="Conversation session id (continues it).")
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="One JSON event per line.")] = False,
        max_retries: Annotated[
            int | None, typer.Option(min=0, help="Corrections per subtask.")
        ] = None,
        context_from: Annotated[
            Path | None, typer.Option(help="Handover file to continue from.")
        ] = None,
        context_return: Annotated[
            Path | None, typer.Option(help="Write handover results here.")
        ] = None,
        non_interactive: Annotated[
            bool, typer.Option(help="Never prompt; take the task from the handover.")
        ] = False,
        handover_timeout: Annotated[
            float | None, typer.Option(min=0.001, help="Seconds this run may take.")
        ] = None,
        max_requests: Annotated[
            int | None,
            typer.Option(min=1, help="Most model requests for the whole run (all agents)."),
        ] = None,
    ) -> None:
        """One turn of the team (Manager, Worker, Validator) on the current project."""
        if context_return is not None and context_from is None:
            raise typer.BadParameter("--context-return needs --context-from")
        # First event before the heavy imports (pydantic-ai ...): a spawner sees the run start.
        announced = _announce(
            as_json=as_json, task=task, persona=persona, session=session, context_from=context_from
        )
        from personae.project import Project
        from personae.settings import PersonaeSettings
        from personae.team.session import RunOptions

        settings = PersonaeSettings()
        cwd = Path.cwd()
        handover = None
        if context_from is not None:
            from personae.handover import runflow

            handover = runflow.begin(
                context_from, persona, cwd=cwd, non_interactive=non_interactive
            )
            persona = handover.persona
            task = task or handover.prompt or handover.task
            cwd = handover.workdir
            for warning in handover.warnings:
                typer.echo(f"personae: warning: {warning}", err=True)
        if not task:
            if non_interactive or not sys.stdin.isatty():
                raise typer.BadParameter("give a TASK (or --context-from a handover)")
            task = typer.prompt("Task")
        project = Project.open(cwd)
        options = RunOptions(
            root=project.root,
            persona=persona,
            model=model or settings.model or project.config.model,
            session=session,
            max_retries=settings.max_retries if max_retries is None else max_retries,
            budget_share=settings.budget_share,
            handover_text=handover.section_text if handover else None,
            request_cap=max_requests,
            handover_timeout=settings.handover_timeout,
            announced=announced,
        )
        view = _View(as_json=as_json)
        timeout = handover_timeout if handover_timeout is not None else (
            settings.handover_timeout if handover is not None else None
        )  # fmt: skip
        endpoint = settings.otel_endpoint or project.config.otel_endpoint
        try:
            outcome = _execute(task, options, view, timeout)
        except BaseException as exc:
            if endpoint and isinstance(exc, PersonaeError | TimeoutError):
                _export_trace(project.state_db, str(announced["run_id"]), endpoint)
            if handover is not None:
                from personae.handover import runflow

                reason = "timed out" if isinstance(exc, TimeoutError) else str(exc)
                runflow.finish(
                    handover, status="failure", output=None, error=reason,
                    return_path=context_return,
                )  # fmt: skip
            if isinstance(exc, TimeoutError):
                from personae.errors import RunError

                raise RunError(f"run took longer than {timeout} s") from None
            raise
        _export_trace(project.state_db, outcome.run_id, endpoint)
        if handover is not None:
            from personae.handover import runflow

            shown = len(handover.warnings)
            result = outcome.result
            written = runflow.finish(
                handover,
                status="success" if result.status == "done" else "partial",
                output=result.final_text,
                artifacts=outcome.files_written(),
                next_steps=result.warnings,
                return_path=context_return,
            )
            for warning in handover.warnings[shown:]:
                typer.echo(f"personae: warning: {warning}", err=True)
            if not as_json:
                typer.echo(f"handover results written to {written}")
        if not as_json:
            typer.echo(
                f"run {outcome.run_id} (session {outcome.session_id}, model "
                f"{outcome.model_label}); details: personae runs show {outcome.run_id}"
            )

    @app.command("demo")
    def demo(
        as_json: Annotated[bool, typer.Option("--json", help="One JSON event per line.")] = False,
        keep: Annotated[
            Path | None, typer.Option(help="Copy the sample project here and keep it.")
        ] = None,
    ) -> None:
        """Run the team offline on a bundled sample project with the SCRIPTED model."""
        _run_demo(as_json=as_json, keep=keep)


def _run_demo(*, as_json: bool, keep: Path | None) -> None:
    import shutil
    import tempfile
    from importlib import resources

    from personae.errors import UsageError
    from personae.team.session import RunOptions

    bundle = Path(str(resources.files("personae.examples") / "demo"))
    scenario = bundle / "scenario.yaml"
    task = "Give me the port the service listens on and the setup steps."
    view = _View(as_json=as_json, explain=True)
    holder = None if keep is not None else tempfile.TemporaryDirectory(prefix="personae-demo-")
    target = keep if keep is not None else Path(holder.name) / "weather-service"  # type: ignore[union-attr]
    if keep is not None and keep.exists() and not keep.is_dir():
        raise UsageError("not a folder", file=keep, field="--keep")
    if keep is not None and keep.exists() and any(keep.iterdir()):
        raise UsageError("folder is not empty; pick a new one", file=keep, field="--keep")
    try:
        shutil.copytree(bundle / "project", target, dirs_exist_ok=True)
        if not as_json:
            view.console.print(
                "[bold]personae demo[/bold]: a team of Manager, Worker and Validator on a "
                f"sample project ({target}).\n"
                "[yellow]Model: SCRIPTED[/yellow], a local OpenAI-compatible server on "
                "127.0.0.1 that replays the answers in\n"
                f"  {scenario}\n"
                "It is not a real language model; everything else (HTTP, provider code, tools, "
                "validation, storage) is real.\n"
                f"Task: {task}\nPersona: maintainer (may delegate to the scout sub-agent)\n"
            )
        options = RunOptions(
            root=target, persona="maintainer", model=f"scripted:{scenario}",
            include_git_log=False,
        )  # fmt: skip
        outcome = _execute(task, options, view)
        from personae.settings import PersonaeSettings

        _export_trace(target / ".personae" / "state.db", outcome.run_id,
                      PersonaeSettings().otel_endpoint)  # fmt: skip
        if not as_json:
            where = (
                f"personae runs show {outcome.run_id}  (run it in {target})"
                if keep is not None
                else "use --keep DIR to keep the project and inspect the stored run"
            )
            view.console.print(
                f"\nStored as run {outcome.run_id} in {target}/.personae/state.db; {where}"
            )
    finally:
        if holder is not None:
            holder.cleanup()


def _export_trace(db: Path, run_id: str, endpoint: str | None) -> None:
    """Send the stored run to the OpenTelemetry endpoint, when one is set (else nothing)."""
    if endpoint:
        from personae.telemetry import export_if_enabled

        try:
            export_if_enabled(db, run_id, endpoint)
        except PersonaeError as exc:  # the run is stored; a lost trace is only a warning
            typer.echo(f"personae: warning: {exc}", err=True)


def _store(root: Path) -> Any:
    from personae.project import Project
    from personae.store.db import Store
    from personae.store.runs import RunStore

    project = Project.open(root)
    if not project.state_db.exists():
        from personae.errors import UsageError

        raise UsageError(
            "no runs stored here yet (run 'personae run TASK' first)", file=project.state_db
        )
    return RunStore(Store(project.state_db))


@runs_app.command("list")
def list_runs(
    limit: Annotated[int, typer.Option(min=1, help="How many runs.")] = 20,
    session: Annotated[str | None, typer.Option(help="Only this session.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Recent runs of this project, newest first."""
    project_db = Path.cwd() / ".personae" / "state.db"
    if not project_db.exists():
        # Nothing stored yet is an empty list, not an error (like `handover ledger`).
        if as_json:
            typer.echo("[]")
        else:
            typer.echo("no runs stored here yet (run 'personae run TASK' first)")
        return
    runs = _store(Path.cwd())
    rows = runs.list_runs(limit=limit, session_id=session)
    if as_json:
        typer.echo(json.dumps([r.model_dump(mode="json") for r in rows], indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("started", "status", "persona", "model", "task")
    # Ids are what `runs show` takes: never cut them, whatever the terminal width.
    table.add_column(
        "id", no_wrap=True, overflow="ignore", min_width=len(rows[0].id) if rows else 2
    )
    table.columns.insert(0, table.columns.pop())
    for r in rows:
        table.add_row(r.id, r.started_at[:19], r.status, r.persona or "-", r.model, r.task[:60])
    Console(width=160 if not sys.stdout.isatty() else None).print(table)


@runs_app.command("show")
def show_run(
    run_id: Annotated[str, typer.Argument(help="Run id (a unique prefix works).")],
    as_json: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
    full: Annotated[bool, typer.Option(help="Print every assembled context in full.")] = False,
) -> None:
    """A run's events and every model call with its assembled context and budget report."""
    runs = _store(Path.cwd())
    record = runs.get(run_id)
    events = runs.events(record.id)
    calls = runs.model_calls(record.id)
    if as_json:
        payload = {
            "run": record.model_dump(mode="json"),
            "events": [e.model_dump(mode="json") for e in events],
            "model_calls": [c.model_dump(mode="json") for c in calls],
        }
        typer.echo(json.dumps(payload, indent=2))
        return
    from rich.console import Console
    from rich.text import Text

    from personae.context.report import BudgetReport
    from personae.team.events import Event, EventKind
    from personae.team.render import describe

    console = Console(highlight=False, soft_wrap=True)
    console.print(Text(f"run {record.id}: {record.status}, model {record.model}", style="bold"))
    console.print(f"task: {record.task}")
    for e in events:
        event = Event(run_id=record.id, seq=e.seq, kind=EventKind(e.kind), at=e.at,
                      message=e.message, subtask=e.subtask, data=e.data)  # fmt: skip
        for style, text in describe(event):
            console.print(Text(text, style=_STYLES.get(style, "")))
    console.print(Text(f"\n{len(calls)} model call(s):", style="bold"))
    for c in calls:
        where = f"subtask {c.subtask}" if c.subtask else "turn"
        console.print(
            Text(f"\n#{c.seq} {c.role} ({c.persona or '-'}, {where}) usage {c.usage}", style="bold")
        )
        try:
            console.print(BudgetReport.model_validate(c.budget).to_text())
        except ValueError:
            console.print(json.dumps(c.budget))
        text = (
            c.context_text
            if full
            else c.context_text[:600] + ("…" if len(c.context_text) > 600 else "")
        )
        console.print(Text(text, style="dim"))
