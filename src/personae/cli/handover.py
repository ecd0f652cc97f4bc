"""`personae handover ...`: create, show, validate, schema, run, ledger."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from personae.cli._preflight import before_run
from personae.errors import CommandLineError, ErrorPlace, UsageError
from personae.limits import DEFAULTS

if TYPE_CHECKING:
    from personae.handover.schema import ContextHandover
    from personae.security.policy import PathPolicy
    from personae.store.handovers import HandoverLedger

__all__ = ["app", "duration_option"]

app = typer.Typer(help="Handover files: move work to another persona.", no_args_is_help=True)


def _fmt(value: str | None) -> Any:
    if value is None:
        return None
    if value not in {"json", "yaml"}:
        raise UsageError(f"--context-format must be json or yaml, not {value!r}")
    return value


def _check_persona_name(value: str, flag: str) -> None:
    """Refuse a persona name the handover schema would reject, naming the flag."""
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,127}", value):
        raise UsageError(
            f"bad persona name {value!r}: start with a letter, digit or '_', then letters, "
            "digits or '_.:@-' (at most 128 characters)",
            field=flag,
        )


def _check_texts(task: str, insights: list[str]) -> None:
    """Empty or oversized ``--task``/``--insight``: an error naming the flag, nothing written."""
    # local import: CLI start-up (pydantic loads only when this option is parsed)
    from pydantic import TypeAdapter, ValidationError

    from personae.handover.schema import Text4k, Text20k

    if not task.strip():
        raise UsageError("must not be empty", field="--task")
    checks: list[tuple[str, Any, str]] = [("--task", Text20k, task)]
    checks += [("--insight", Text4k, text) for text in insights]
    for flag, kind, text in checks:
        try:
            TypeAdapter(kind).validate_python(text)
        except ValidationError as exc:
            raise UsageError(exc.errors()[0]["msg"], field=flag) from None


def duration_option(text: str, *, bare: Any, flag: str) -> float:
    """A duration flag's seconds; a bad value is a usage error (exit 2) naming the flag."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.handover.duration import parse_duration

    try:
        return parse_duration(text, bare=bare, flag=flag)
    except UsageError as exc:
        raise typer.BadParameter(exc.message, param_hint=flag) from None


@app.command("create")
def create(  # noqa: PLR0917 (typer options)
    to: Annotated[str, typer.Option("--to", help="Target persona.")],
    task: Annotated[str, typer.Option("--task", help="What the target persona should do.")],
    file: Annotated[
        list[str] | None,
        typer.Option("--file", help="Artifact as PATH:TYPE:DESCRIPTION (repeatable)."),
    ] = None,
    insight: Annotated[
        list[str] | None, typer.Option("--insight", help="A key finding (repeatable).")
    ] = None,
    data: Annotated[str | None, typer.Option("--data", help="Structured data as JSON.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Where to write the file.")] = None,
    handover_dir: Annotated[
        Path | None,
        typer.Option(
            "--handover-dir",
            help="User-level folder to write the file into (default: PERSONAE_HANDOVER_DIR, "
            "else the project's .personae/handovers).",
        ),
    ] = None,
    context_format: Annotated[
        str | None, typer.Option("--context-format", help="json (default) or yaml.")
    ] = None,
    source: Annotated[str, typer.Option("--from", help="Source persona.")] = "user",
    session: Annotated[str, typer.Option("--session", help="Source session id.")] = "",
    interactive: Annotated[
        bool, typer.Option("--interactive", help="Target runs interactively.")
    ] = False,
    profile: Annotated[
        str | None,
        typer.Option(
            "--profile",
            help="Context profile the target's worker is assembled with (builder, verifier ...).",
        ),
    ] = None,
    no_target_check: Annotated[
        bool,
        typer.Option(
            "--no-target-check",
            help="The target persona is defined elsewhere (another project): only warn when "
            "it is not in this project's cast.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Create a handover file (and record it in the ledger); prints its path.

    The target persona must be in this project's cast (or bundled), unless
    ``--no-target-check``."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.api.handover import HandoverSpec, create_handover
    from personae.cli._root import project_root
    from personae.handover.create import parse_data, parse_file_spec
    from personae.settings import PersonaeSettings

    project_root(required=True)  # outside a project: write nothing (no file, no ledger)
    with before_run():  # a bad flag or file: one line, exit 2, nothing written
        _check_persona_name(to, "--to")
        _check_persona_name(source, "--from")
        _check_texts(task, list(insight or []))
        spec = HandoverSpec(
            to=to, task=task, source=source, session=session,
            files=[parse_file_spec(f) for f in file or []], insights=list(insight or []),
            data=parse_data(data), interactive=interactive, out=out,
            format=_fmt(context_format), check_target=not no_target_check, profile=profile,
            folder=handover_dir if handover_dir is not None else PersonaeSettings().handover_dir,
        )  # fmt: skip
        try:
            created = create_handover(
                spec, cwd=Path.cwd(),
                on_warning=lambda w: typer.echo(f"personae: warning: {w}", err=True),
            )  # fmt: skip
        except UsageError as exc:  # a flag naming no persona or profile: name the flag
            flag = {"--to": "--to", "profile": "--profile"}.get(exc.field or "")
            if flag is not None:
                raise CommandLineError(exc.message, field=flag) from None
            raise
    if as_json:
        h = created.handover
        summary = {
            "path": str(created.path), "sha256": created.sha256, "handover_id": h.handover_id,
            "source": h.source.persona, "target": h.target.persona,
        }  # fmt: skip
        typer.echo(json.dumps(summary, indent=2))
        return
    typer.echo(str(created.path))


@app.command("show")
def show(
    file: Annotated[Path, typer.Argument(help="Handover file.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the file as JSON.")] = False,
) -> None:
    """Show a handover: source, target, task, artifacts, insights, results.

    The file gets the same checks as ``validate``: one it refuses is not shown.
    """
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.handover.files import read_handover
    from personae.handover.runflow import load_policy

    policy, allow = load_policy(Path.cwd(), file)
    h = read_handover(file, policy=policy, env_allow=allow).handover
    if as_json:
        typer.echo(json.dumps(h.model_dump(mode="json", by_alias=True), indent=2))
        return
    lines = [
        f"handover {h.handover_id} (version {h.version}, {h.timestamp})",
        f"from     {h.source.persona} in {h.source.working_directory}",
        f"to       {h.target.persona}" + (" (interactive)" if h.target.interactive else ""),
        f"task     {h.target.task}",
    ]
    for f in h.artifacts.files:
        lines.append(
            f"file     {f.type}: {f.path}"
            + (f" [{f.format}]" if f.format else "")
            + (f" - {f.description}" if f.description else "")
        )
        if f.summary:
            lines.append(f"         {f.summary}")
    lines += [f"insight  {i}" for i in h.artifacts.insights]
    lines += [f"env      {k}={v}" for k, v in sorted(h.source.environment.items())]
    lines += [f"history  {e.persona}: {e.summary}" for e in h.context.history]
    if h.context.mcp_servers or h.context.mcp_server_configs:
        names = h.context.mcp_servers or sorted(h.context.mcp_server_configs or {})
        lines.append(f"mcp      {', '.join(names)}")
    if h.artifacts.data:
        lines.append(f"data     {json.dumps(h.artifacts.data, sort_keys=True)[:500]}")
    if h.results is None:
        lines.append("results  (none yet)")
    else:
        lines.append(f"results  {h.results.status}")
        if h.results.output:
            lines.append(f"output   {h.results.output[:2000]}")
        if h.results.error:
            lines.append(f"error    {h.results.error}")
    typer.echo("\n".join(lines))


@app.command("validate")
def validate(
    file: Annotated[Path, typer.Argument(help="Handover file.")],
    as_json: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Check a handover file: schema, version, sizes and every safety rule."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.handover.files import read_handover
    from personae.handover.runflow import load_policy
    from personae.security.policy import held_environment

    cwd = Path.cwd()
    policy, allow = load_policy(cwd, file)
    loaded = read_handover(file, policy=policy, env_allow=allow)
    h = loaded.handover
    _, held = held_environment(h.source.environment, allow)
    if held:
        typer.echo(f"personae: warning: {held}", err=True)
    if as_json:
        summary = {
            "ok": True, "file": str(file), "handover_id": h.handover_id,
            "source": h.source.persona, "target": h.target.persona,
            "artifacts": len(h.artifacts.files), "format": loaded.format,
        }  # fmt: skip
        typer.echo(json.dumps(summary, indent=2))
        return
    typer.echo(
        f"ok: {file} (handover {h.handover_id}, {h.source.persona} -> {h.target.persona}, "
        f"{len(h.artifacts.files)} artifact(s), {loaded.format})"
    )


@app.command("schema")
def schema(
    out: Annotated[Path | None, typer.Option("--out", help="Write to this file.")] = None,
) -> None:
    """Print the JSON Schema of handover files (generated from the model)."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.handover.jsonschema import handover_json_schema_text

    text = handover_json_schema_text()
    if out is None:
        sys.stdout.write(text)
    else:
        # local import: CLI start-up (only the command that runs loads what it needs)
        from personae.persona.scaffold import write_text_atomic

        write_text_atomic(out, text)
        typer.echo(f"wrote {out}", err=True)


@app.command("run")
def run(  # noqa: PLR0917 (typer options)
    file: Annotated[Path, typer.Argument(help="Handover file.")],
    timeout: Annotated[
        str | None,
        typer.Option(
            "--timeout",
            help="Time per attempt: 300s, 300000ms, 5m; a bare number is seconds (default "
            f"{DEFAULTS.handover_timeout:g}s).",
        ),
    ] = None,
    retries: Annotated[
        int, typer.Option("--retries", min=0, help="Retries after the first attempt.")
    ] = DEFAULTS.handover_retries,
    backoff: Annotated[
        float,
        typer.Option(
            "--backoff",
            min=0.0,
            help=f"First retry delay in seconds (x{DEFAULTS.handover_backoff_factor:g} each).",
        ),
    ] = DEFAULTS.handover_backoff,
    persona: Annotated[
        str | None, typer.Option("--persona", help="Run as this persona (default: target).")
    ] = None,
    return_path: Annotated[
        Path | None, typer.Option("--return", help="Write results here instead.")
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Model for the child (provider:name).")
    ] = None,
    interactive: Annotated[
        bool | None,
        typer.Option(
            "--interactive/--batch",
            help="Attach the child to this terminal (it asks for follow-ups; one attempt) or "
            "run it in batch mode. Default: the handover's target.interactive.",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object: status, file, results, attempts.")
    ] = False,
) -> None:
    """Run the target persona in a child `personae run` process; exit code per docs."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.handover.child import ChildOptions, execute_handover
    from personae.handover.files import read_handover
    from personae.handover.runflow import load_policy
    from personae.security.policy import held_environment
    from personae.settings import PersonaeSettings

    cwd = Path.cwd()
    seconds = (  # the flags first, then the file
        duration_option(timeout, bare="s", flag="--timeout")
        if timeout is not None
        else PersonaeSettings().handover_timeout
    )
    with before_run():  # a mistake in the file or a flag: one line, exit 2, no child
        policy, allow = load_policy(cwd, file)
        loaded = read_handover(file, policy=policy, env_allow=allow)  # refuse unsafe files first
        _check_child(loaded.handover, file, persona=persona, model=model, policy=policy)
    _, held = held_environment(loaded.handover.source.environment, allow)
    if held:
        typer.echo(f"personae: warning: {held}", err=True)
    attached = loaded.handover.target.interactive if interactive is None else interactive

    def report(a: Any) -> None:
        state = "timed out" if a.timed_out else f"exit {a.exit_code}"
        typer.echo(f"attempt {a.attempt}: {state} in {a.duration:.2f}s", err=True)

    child = ChildOptions(
        timeout=seconds, attempts=retries + 1, backoff=backoff, persona=persona, model=model,
        return_path=return_path,
    )  # fmt: skip
    if attached:
        # local import: CLI start-up (only the command that runs loads what it needs)
        from personae.handover.interactive import run_interactive

        outcome = run_interactive(file, cwd=cwd, options=child)
        results = outcome.handover.results
        if as_json:
            _echo_run_json(outcome.status, outcome.path, outcome.exit_code, results, [])
            raise typer.Exit(outcome.exit_code)
        typer.echo(f"{outcome.status}: {outcome.path}")
        if results is not None and results.error:
            typer.echo(f"error: {results.error}", err=True)
        raise typer.Exit(outcome.exit_code)
    outcome = execute_handover(file, cwd=cwd, options=child, on_attempt=report)
    results = outcome.handover.results
    if as_json:
        tries = [
            {"attempt": a.attempt, "exit_code": a.exit_code, "timed_out": a.timed_out,
             "duration": round(a.duration, 3)}
            for a in outcome.attempts
        ]  # fmt: skip
        _echo_run_json(outcome.status, outcome.path, outcome.exit_code, results, tries)
        raise typer.Exit(outcome.exit_code)
    typer.echo(f"{outcome.status}: {outcome.path}")
    if results is not None and results.output:
        typer.echo(results.output)
    if results is not None and results.error:
        typer.echo(f"error: {results.error}", err=True)
    raise typer.Exit(outcome.exit_code)


def _check_child(
    h: ContextHandover, file: Path, *, persona: str | None, model: str | None, policy: PathPolicy
) -> None:
    """What the child ``personae run --context-from FILE`` would refuse, checked before it
    starts (a refusal there is a failed attempt, retried): the persona (``--persona``, else
    the file's ``target.persona``), the profile and the model, in the project the child
    works in. Outside a project the child's own refusal stands."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.handover.runflow import run_folder
    from personae.layout import find_root
    from personae.persona.preflight import check_run
    from personae.project import Project
    from personae.settings import PersonaeSettings, chosen_model

    root = find_root(run_folder(h, Path.cwd().resolve(), policy)[0])
    if root is None:
        return
    place: ErrorPlace = (
        {"field": "--persona"} if persona else {"file": file, "field": "target.persona"}
    )
    default = chosen_model(model, PersonaeSettings(), Project.open(root).config.model)[0]
    check_run(root, persona=persona or h.target.persona, model=default, profile=h.target.profile,
              persona_place=place)  # fmt: skip


def _echo_run_json(
    status: str, path: Path, exit_code: int, results: Any, attempts: list[dict[str, Any]]
) -> None:
    """``handover run --json``: one object with the outcome and the results written back."""
    body = {
        "status": status, "path": str(path), "exit_code": exit_code,
        "output": results.output if results is not None else None,
        "error": results.error if results is not None else None,
        "attempts": attempts,
    }  # fmt: skip
    typer.echo(json.dumps(body, indent=2))


def _ledger_json(book: HandoverLedger, handover_id: str | None, limit: int) -> object:
    if handover_id is None:
        return [asdict(e) for e in book.recent(limit=limit)]
    entry = book.get(handover_id)
    if entry is None:
        raise UsageError(f"no handover {handover_id!r} in the ledger")
    return {**asdict(entry), "events": [asdict(ev) for ev in book.events(entry.handover_id)]}


@app.command("ledger")
def ledger(
    handover_id: Annotated[
        str | None, typer.Argument(help="Show this handover's audit trail.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1)] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """List recorded handovers, or one handover's events (works after its file is gone)."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.project import Project
    from personae.store.db import store_present
    from personae.store.handovers import HandoverLedger

    db = Project.discover(Path.cwd()).state_db
    if not store_present(db):  # a PostgreSQL store has no file
        if handover_id is not None:
            raise UsageError(f"no handover {handover_id!r} in the ledger")
        typer.echo("[]" if as_json else "no handovers recorded")
        return
    book = HandoverLedger.open(db)
    try:
        if as_json:
            typer.echo(json.dumps(_ledger_json(book, handover_id, limit), indent=2, default=str))
            return
        if handover_id is None:
            for e in book.recent(limit=limit):
                typer.echo(
                    f"{e.handover_id}  {e.status:<8} {e.source_persona} -> {e.target_persona}"
                    f"  {e.created_at}  {e.path}"
                )
            return
        entry = book.get(handover_id)
        if entry is None:
            raise UsageError(f"no handover {handover_id!r} in the ledger")
        typer.echo(
            f"{entry.handover_id}: {entry.status} ({entry.source_persona} -> "
            f"{entry.target_persona}), file {entry.path} sha256 {entry.file_hash}"
        )
        for ev in book.events(entry.handover_id):
            detail = f"  {ev.detail}" if ev.detail else ""
            typer.echo(f"  {ev.at}  {ev.event:<8} {ev.status or '':<8}{detail}")
    finally:
        book.close()
