"""`personae runs ...`: the stored runs of a project and their events."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from personae.cli._options import JsonOpt
from personae.cli._root import project_root
from personae.cli.run import STYLES
from personae.errors import UsageError
from personae.layout import Layout

if TYPE_CHECKING:
    from personae.store.answers import ModelAnswer

__all__ = ["runs_app"]

runs_app = typer.Typer(help="Stored runs and their events.", no_args_is_help=True)


def _store(root: Path) -> Any:
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.project import Project
    from personae.store.db import Store, store_present
    from personae.store.runs import RunStore

    project = Project.open(root)
    if not store_present(project.state_db):  # a PostgreSQL store has no file
        raise UsageError(
            "no runs stored here yet (run 'personae run TASK' first)", file=project.state_db
        )
    return RunStore(Store(project.state_db))


_TABLE_WIDTH = 120
"""Narrower terminals get ``runs list`` as two lines a run instead of a table."""


@runs_app.command("list")
def list_runs(
    limit: Annotated[int, typer.Option(min=1, help="How many runs.")] = 20,
    session: Annotated[str | None, typer.Option(help="Only this session.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Recent runs of this project, newest first."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.store.db import store_present

    project_db = Layout(project_root()).state_db
    if not store_present(project_db):
        # Nothing stored yet is an empty list, not an error (like `handover ledger`).
        if as_json:
            typer.echo("[]")
        else:
            typer.echo("no runs stored here yet (run 'personae run TASK' first)")
        return
    runs = _store(project_root())
    runs.reconcile()
    rows = runs.list_runs(limit=limit, session_id=session)
    if as_json:
        typer.echo(json.dumps([r.model_dump(mode="json") for r in rows], indent=2))
        return
    # local import: CLI start-up (rich's console loads only when this command prints)
    from rich.console import Console
    from rich.table import Table

    console = Console(width=160 if not sys.stdout.isatty() else None, highlight=False)
    if console.width < _TABLE_WIDTH:  # a narrow terminal: two lines a run, nothing cut
        # local import: CLI start-up (rich's console loads only when this command prints)
        from rich.text import Text

        for r in rows:
            console.print(
                Text(f"{r.id}  {r.status:<9} {r.started_at[:16].replace('T', ' ')}  "
                     f"{r.persona or '-'}", style="bold"),
                soft_wrap=True,
            )  # fmt: skip
            console.print(Text(f"    {r.task[:200]}  (model {r.model}){_replay_note(r)}"),
                          soft_wrap=True)  # fmt: skip
        return
    table = Table()
    for name in ("started", "status", "persona", "model", "task"):
        table.add_column(name, overflow="fold")  # long paths wrap, never end in "…"
    # Ids are what `runs show` takes: never cut them, whatever the terminal width.
    table.add_column(
        "id", no_wrap=True, overflow="ignore", min_width=len(rows[0].id) if rows else 2
    )
    table.columns.insert(0, table.columns.pop())
    for r in rows:
        task = r.task[:60] + _replay_note(r)
        table.add_row(r.id, r.started_at[:19], r.status, r.persona or "-", r.model, task)
    console.print(table)


def _replay_note(record: Any) -> str:
    """`` (replay of RUN)`` for a replay run, else nothing."""
    return f" (replay of {record.replay_of})" if record.replay_of else ""


def _tokens_line(usage: dict[str, Any]) -> str:
    """Input tokens of one model call: one figure (the provider's) and our count's drift."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.telemetry.inputcount import input_count

    return f"input tokens: {input_count(usage).text()}; output {usage.get('output_tokens', '?')}"


@runs_app.command("show")
def show_run(
    run_id: Annotated[str, typer.Argument(help="Run id (a unique prefix works).")],
    as_json: JsonOpt = False,
    full: Annotated[bool, typer.Option(help="Print every assembled context in full.")] = False,
    tree: Annotated[
        bool,
        typer.Option(help="The run and every run it started: calls, tokens, time, cost."),
    ] = False,
) -> None:
    """A run's events and every model call with its assembled context and budget report."""
    runs = _store(project_root())
    runs.reconcile()
    if tree:
        _show_tree(runs, run_id, as_json=as_json)
        return
    record = runs.get(run_id)
    events = runs.events(record.id)
    calls = runs.model_calls(record.id)
    if as_json:
        _show_json(record, events, calls)
        return
    # local import: CLI start-up (rich's console loads only when this command prints)
    from rich.console import Console
    from rich.text import Text

    from personae.context.report import BudgetReport, read_stored_budget, stored_budget_json
    from personae.team.events import event_from_json
    from personae.team.render import describe

    console = Console(highlight=False, soft_wrap=True)
    console.print(Text(f"run {record.id}: {record.status}, model {record.model}", style="bold"))
    console.print(Text(f"task: {record.task}"))
    for line in _replay_lines(runs, record.id, record.replay_of):
        console.print(Text(line))
    if record.error:
        console.print(Text(f"reason: {record.error}", style="red"))
    if record.pid is not None:
        console.print(
            Text(
                f"process: pid {record.pid} on {record.host or '?'}, started "
                f"{record.started_at}, last heartbeat {record.heartbeat_at or '-'}, "
                f"finished {record.finished_at or '-'}",
                style="dim",
            )
        )
    for e in events:
        event = event_from_json({"run_id": record.id, **e.model_dump()})
        for style, text in describe(event):
            console.print(Text(text, style=STYLES.get(style, "")))
    console.print(Text(f"\n{len(calls)} model call(s):", style="bold"))
    for c in calls:
        where = f"subtask {c.subtask}" if c.subtask else "turn"
        console.print(Text(f"\n#{c.seq} {c.role} ({c.persona or '-'}, {where})", style="bold"))
        console.print(Text(_tokens_line(c.usage)))
        report = read_stored_budget(c.budget)
        if isinstance(report, BudgetReport):
            console.print(report.to_text())
        elif report is not None:  # a sub-agent's call: its brief
            console.print(Text(f"sub-agent brief: {json.dumps(stored_budget_json(c.budget))}"))
        else:
            console.print(Text("no budget report in this form", style="dim"))
        text = (
            c.context_text
            if full
            else c.context_text[:600] + ("…" if len(c.context_text) > 600 else "")
        )
        console.print(Text(text, style="dim"))
        console.print(Text(_answer_text(c.answer, full=full)))


def _show_json(record: Any, events: list[Any], calls: list[Any]) -> None:
    """``runs show RUN --json``: the stored row, its result (the one the Python API
    returned, read from the ``final`` event; ``null`` while it runs, when it crashed
    without one, or when a stored event is not readable: ``result_unreadable`` says
    which), its events, and its calls with each budget as its model's dump."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.context.report import stored_budget_json
    from personae.team.result import result_of

    try:
        result, unreadable = result_of(record, events), None
    except ValueError as exc:  # a stored event this version cannot read: say which
        result, unreadable = None, str(exc)
    payload = {
        "run": record.model_dump(mode="json"),
        "result": result.to_json_dict() if result is not None else None,
        "result_unreadable": unreadable,
        "events": [e.model_dump(mode="json") for e in events],
        "model_calls": [
            c.model_dump(mode="json") | {"budget": stored_budget_json(c.budget)} for c in calls
        ],
    }
    typer.echo(json.dumps(payload, indent=2))


def _show_tree(runs: Any, run_id: str, *, as_json: bool) -> None:
    """``runs show RUN --tree``: the usage tree below the run (prices from the config)."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.project import Project
    from personae.telemetry.usagetree import render_tree, usage_tree

    node = usage_tree(runs, run_id, Project.open(project_root()).price_table())
    if as_json:
        typer.echo(json.dumps(node.as_json(), indent=2))
        return
    for line in render_tree(node):
        typer.echo(line)


def _replay_lines(runs: Any, run_id: str, replay_of: str | None) -> list[str]:
    """Which run a replay re-ran (and how), and which runs replayed this one."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.store.replays import ReplayStore

    replays = ReplayStore(runs.store)
    lines = []
    link = replays.link_of(run_id) if replay_of else None
    if link is not None:
        how = f"live from call {link.from_call} against {link.model or 'the same model'}"
        if link.persona_prompt:
            how += f", persona prompt {link.persona_prompt}"
        lines.append(f"replay of {link.of} ({how}; {link.recorded_calls} call(s) from the record)")
        lines += [f"  project: {d}" for d in link.project_drift]
    lines += [f"replayed by {other}" for other in replays.replays_of(run_id)]
    return lines


def _answer_text(answer: ModelAnswer | None, *, full: bool) -> str:
    """A model call's answer for ``runs show`` (``None``: stored before answers were kept)."""
    if answer is None:
        return "answer: not recorded (stored before answers were kept)"
    head = f"answer ({answer.finish_reason or 'finish reason not reported'}"
    head += f", {answer.chars} chars{', cut to the cap' if answer.cut else ''}):"
    lines = [head]
    if answer.text:
        text = answer.text if full or len(answer.text) <= 600 else answer.text[:600] + "…"
        lines.append(f"  text: {text}")
    for call in answer.tool_calls:
        args = call.args if full or len(call.args) <= 600 else call.args[:600] + "…"
        lines.append(f"  tool call: {call.name}({args})")
    if len(lines) == 1:
        lines.append("  (empty)")
    return "\n".join(lines)
