"""`personae run` and `personae demo` (stored runs: :mod:`personae.cli.runs`)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from personae.cli import _options
from personae.cli._pipes import BROKEN_PIPE_EXIT, silence_stdout
from personae.cli._preflight import before_run
from personae.cli._root import project_root
from personae.errors import CommandLineError, ErrorPlace, PersonaeError, RunError, UsageError
from personae.layout import Layout
from personae.limits import DEFAULTS

if TYPE_CHECKING:
    import asyncio

    from personae.handover.runflow import HandoverSession
    from personae.handover.work import HandoverTurn, HandoverWork
    from personae.lineage import Link
    from personae.persona.cast import Cast
    from personae.settings import PersonaeSettings
    from personae.team.events import Event, RunFinished, RunStarted
    from personae.team.result import RunResult
    from personae.team.session import RunOptions

__all__ = ["STYLES", "export_trace", "register"]

STYLES = {  # rich styles of the describe() kinds, shared with `runs show`
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
    """Prints events as they arrive: rich lines, or one JSON object per line.

    When the reader of stdout goes away (``| head``), the view goes quiet and cancels the
    run it shows (``closed`` says so): the run ends ``cancelled``, not ``running`` forever.
    """

    def __init__(self, *, as_json: bool, explain: bool = False) -> None:
        # local import: CLI start-up (rich's console loads only when this command prints)
        from rich.console import Console

        class _Console(Console):
            def on_broken_pipe(self) -> None:  # rich would exit(1): let the view end the run
                raise BrokenPipeError

        self.as_json = as_json
        self.explain = explain
        self.console: Console = _Console(highlight=False, soft_wrap=True)
        self.seen: set[str] = set()
        self.status: Any = None
        self.task: asyncio.Task[Any] | None = None
        self.closed = False
        self.streamed = ""
        """Answer text printed so far from ``answer_delta`` events (reset by ``final``)."""

    def __call__(self, event: Event) -> None:
        if self.closed:
            return
        try:
            self._show(event)
        except BrokenPipeError:
            self.close()

    def close(self) -> None:
        """The reader went away: print nothing more and cancel the run."""
        self.closed = True
        silence_stdout()
        if self.task is not None:
            self.task.cancel()

    def _show(self, event: Event) -> None:
        if event.kind.value == "call":  # a model call starts, streams or ends: the spinner says so
            return _options.show_call(None if self.as_json else self.status, event)
        if self.as_json:
            sys.stdout.write(json.dumps(event.to_json_dict()) + "\n")
            sys.stdout.flush()
            return
        # local import: CLI start-up (rich's console loads only when this command prints)
        from rich.text import Text

        from personae.team.events import AnswerStreamed, RunFinished
        from personae.team.render import describe

        if isinstance(event, AnswerStreamed):  # streamed on a terminal; else whole at final
            if self.console.is_terminal:
                self._delta(event.text)
            return
        if isinstance(event, RunFinished) and self.streamed:
            self._end_stream(event)
            return
        for style, text in describe(event, explain=self.explain, seen=self.seen):
            self.console.print(Text(text, style=STYLES.get(style, "")))
        if self.status is not None:
            where = f" (subtask {event.subtask})" if event.subtask else ""
            self.status.update(f"working{where}: last step {event.kind.value}")

    def _delta(self, piece: str) -> None:
        """Print a piece of the answer as it arrives (the spinner stops first)."""
        if self.status is not None:
            self.status.stop()
            self.status = None
        if not self.streamed:
            self.console.print("Answer:", style=STYLES.get("title", ""))
            self.console.file.write("  ")
        self.streamed += piece
        self.console.file.write(piece.replace("\n", "\n  "))
        self.console.file.flush()

    def _end_stream(self, event: RunFinished) -> None:
        """The ``final`` event after a streamed answer: only what was not streamed yet."""
        # local import: CLI start-up (rich's console loads only when this command prints)
        from rich.text import Text

        from personae.team.render import describe

        self.console.file.write("\n")
        streamed, self.streamed = self.streamed.strip(), ""
        rest = event.message.removeprefix(streamed) if streamed else event.message
        lines = describe(event, explain=self.explain, seen=self.seen)
        status = f"  status: {event.status}"
        self.console.print(Text(status, style=STYLES.get("note", "")))
        for line in rest.strip("\n").splitlines():
            self.console.print(Text(f"  {line}", style=STYLES.get("answer", "")))
        for style, text in lines[-1:]:  # the usage line
            self.console.print(Text(text, style=STYLES.get(style, "")))


def _execute(
    task: str, options: RunOptions, view: _View, timeout: float | None = None
) -> RunResult[Any]:
    # local import: CLI start-up (only the command that runs loads what it needs)
    import asyncio

    from personae.procs import RUN_PROCESSES
    from personae.team.session import run_turn

    # Orphans a command leaves behind (setsid, double fork) are reparented to this
    # process and die with the run like everything else it starts.
    RUN_PROCESSES.capture_orphans()

    async def go() -> RunResult[Any]:
        view.task = asyncio.current_task()
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
            if view.streamed and not view.closed:  # the run ended inside a streamed answer
                view.streamed = ""
                view.console.file.write("\n")


def _follow_ups(
    first: RunResult[Any], options: RunOptions, view: _View, timeout: float | None
) -> list[RunResult[Any]]:
    """Interactive handover: ask for follow-up tasks until an empty line (or end of input).

    Each follow-up is one more turn in the same conversation session; the
    handover's results hold every turn's answer.
    """
    done: list[RunResult[Any]] = []
    session = first.session_id
    while True:
        try:
            text = typer.prompt("Follow-up (empty line to finish)", default="", show_default=False)
        except (EOFError, typer.Abort):
            break
        if not text.strip():
            break
        more = dataclasses.replace(options, session=session, announced=None)
        outcome = _execute(text.strip(), more, view, timeout)
        done.append(outcome)
        if not view.as_json:
            typer.echo(f"run {outcome.run_id} done ({outcome.status})")
    return done


def _announce(
    *,
    as_json: bool,
    task: str | None,
    persona: str | None,
    session: str | None,
    context_from: Path | None,
    db: Path,
    sandbox: str,
) -> RunStarted:
    """Store the run and its ``start`` event in ``db``, then show it; returns the event.

    Stored first, so every id ever printed is one ``personae runs show`` knows, however
    the run ends (even killed in its first second).
    """
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.store.db import Store
    from personae.store.runs import RunStore
    from personae.team.runlog import start_run

    with Store(db) as store:
        event = start_run(
            RunStore(store), task=task, persona=persona, session=session,
            context_from=context_from, sandbox=sandbox,
        )  # fmt: skip
    line = (
        json.dumps(event.to_json_dict())
        if as_json
        else f"Run {event.run_id} started; loading the team ..."
    )
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    return event


def _shell_mode(root: Path) -> str:
    """How this run's ``run_shell`` commands will run (its ``start`` event says it)."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.project import load_config
    from personae.tools.sandbox import describe_mode

    try:
        mode = load_config(Layout(root)).sandbox.mode
    except PersonaeError:  # the run itself reports the config error
        mode = "auto"
    return describe_mode(mode)


def _end(db: Path, run_id: str, view: _View, exc: BaseException | None) -> str | None:
    """End the run ``run_id`` (if still running) for ``exc`` (``None``: a non-zero exit);
    returns the reason recorded. In ``--json`` mode the ``final`` event written is shown."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.store.db import Store
    from personae.store.runs import RunStore
    from personae.store.status import RunStatus
    from personae.team.runlog import describe_failure, end_run

    if view.closed:
        status, reason = RunStatus.CANCELLED, "output closed (broken pipe)"
    elif isinstance(exc, typer.BadParameter):
        status, reason = RunStatus.FAILED, exc.format_message()
    elif isinstance(exc, typer.Abort):
        status, reason = RunStatus.FAILED, "aborted"
    elif exc is None:
        status, reason = RunStatus.FAILED, "stopped before the team ran"
    else:
        status, reason = describe_failure(exc)
    with Store(db) as store:
        runs = RunStore(store)
        if runs.get(run_id).status is not RunStatus.RUNNING:
            return None  # ended by the run itself: its status and final event stand
        final = end_run(runs, run_id, status=status, reason=reason)
    if final is not None and view.as_json and not view.closed:
        view(final)
    return reason


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
            int | None,
            typer.Option(
                min=0,
                help=f"Corrections per subtask (default {DEFAULTS.max_retries}; "
                "PERSONAE_MAX_RETRIES).",
            ),
        ] = None,
        context_from: Annotated[
            Path | None, typer.Option(help="Handover file to continue from.")
        ] = None,
        context_return: Annotated[
            Path | None, typer.Option(help="Write handover results here.")
        ] = None,
        non_interactive: Annotated[
            bool,
            typer.Option(
                "--non-interactive", help="Never prompt; take the task from the handover."
            ),
        ] = False,
        handover_timeout: Annotated[
            str | None,
            typer.Option(
                help="Time this run may take: 300s, 300000ms, 5m; a bare number is "
                f"milliseconds. Default {DEFAULTS.handover_timeout:g}s with "
                "--context-from (PERSONAE_HANDOVER_TIMEOUT)."
            ),
        ] = None,
        max_requests: _options.MaxRequestsOpt = None,
        max_tokens_total: _options.MaxTokensTotalOpt = None,
        max_cost: _options.MaxCostOpt = None,
        profile: Annotated[
            str | None,
            typer.Option(help="Context profile of the worker (builder, verifier, ...)."),
        ] = None,
        window: _options.WindowOpt = None,
        call_timeout: _options.CallTimeoutOpt = None,
        deadline: _options.DeadlineOpt = None,
    ) -> None:
        """One turn of the team (Manager, Worker, Validator) on the current project."""
        if context_return is not None and context_from is None:
            raise typer.BadParameter("--context-return needs --context-from")
        limit = None
        if handover_timeout is not None:  # checked before anything starts
            # local import: CLI start-up (only the command that runs loads what it needs)
            from personae.cli.handover import duration_option

            limit = duration_option(handover_timeout, bare="ms", flag="--handover-timeout")
        # local import: CLI start-up (only the command that runs loads what it needs)
        from personae.settings import PersonaeSettings

        with before_run():  # a mistake in a flag, a file or a setting: one line, exit 2
            settings = PersonaeSettings()  # a bad PERSONAE_* variable: an error, not a run
            request = _begin(
                _Request(
                    task=task, persona=persona, model=model, session=session,
                    max_retries=max_retries, max_requests=max_requests, profile=profile,
                    bounds=(window, call_timeout, deadline), caps=(max_tokens_total, max_cost),
                    context_from=context_from, context_return=context_return,
                    non_interactive=non_interactive, timeout=limit, settings=settings,
                )
            )  # fmt: skip
            _check_request(request)
        if request.handover is not None:  # checked: the handover's run starts now
            # local import: CLI start-up (only the command that runs loads what it needs)
            from personae.handover.runflow import record_start

            record_start(request.handover)
        db = Layout(request.cwd).state_db
        # Stored, then shown, before the heavy imports (pydantic-ai ...): a spawner sees
        # the run start, and its id works in `runs show` whatever happens next.
        announced = _announce(
            as_json=as_json, task=request.task, persona=request.persona, session=session,
            context_from=context_from, db=db, sandbox=_shell_mode(request.cwd),
        )  # fmt: skip
        view = _View(as_json=as_json)
        with _settled(db, announced.run_id, view):
            _run_announced(request, view, announced)

    @app.command("demo")
    def demo(
        as_json: Annotated[bool, typer.Option("--json", help="One JSON event per line.")] = False,
        keep: Annotated[
            Path | None, typer.Option(help="Copy the sample project here and keep it.")
        ] = None,
    ) -> None:
        """Run the team offline on a bundled sample project with the SCRIPTED replay server."""
        _run_demo(as_json=as_json, keep=keep)


@dataclass(kw_only=True)
class _Request:
    """What ``personae run`` was asked for (its flags), completed by :func:`_begin`."""

    task: str | None
    persona: str | None
    model: str | None
    session: str | None
    max_retries: int | None
    max_requests: int | None
    profile: str | None
    context_from: Path | None
    bounds: tuple[int | None, float | None, float | None] = (None, None, None)  # --window ...
    caps: tuple[int | None, float | None] = (None, None)  # --max-tokens-total, --max-cost
    link: Link | None = None
    """The run that started this one, from the environment and the handover file."""
    context_return: Path | None
    non_interactive: bool
    timeout: float | None
    """``--handover-timeout`` in seconds (``None``: not given)."""
    settings: PersonaeSettings
    cwd: Path = field(default_factory=Path)
    """The project folder the run works in."""
    handover: HandoverSession | None = None
    """The handover the run continues (``--context-from``)."""
    persona_place: ErrorPlace | None = None
    """Where the persona was named when not by ``--persona`` (the handover's field)."""


def _begin(request: _Request) -> _Request:
    """Pick the project folder; with ``--context-from``, begin the handover (its persona,
    task and working directory win)."""
    if request.context_from is None:
        request.cwd = project_root(required=True)  # outside a project: write nothing
        return request
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.handover import runflow

    handover = runflow.begin(
        request.context_from, request.persona, cwd=Path.cwd(),
        non_interactive=request.non_interactive, record=False,  # recorded once checked
    )  # fmt: skip
    request.handover = handover
    if request.persona is None:  # the file names it: a mistake there names the file's field
        request.persona_place = {"file": request.context_from, "field": "target.persona"}
    request.persona = handover.persona
    request.task = request.task or handover.prompt or handover.task
    request.cwd = handover.workdir
    return request


def _check_request(request: _Request) -> None:
    """Check what the run was asked for before it is stored: a mistake is one line, and
    no run (an unknown ``--persona`` or ``--profile``, a ``--model`` that does not parse,
    no TASK, a persona file that does not load, a missing API key or scenario file; the
    caller makes each exit 2). An interactive run without a TASK asks for it here."""
    if not request.task:
        if request.non_interactive or not sys.stdin.isatty():
            raise CommandLineError("give a TASK (or --context-from a handover)", field="TASK")
        request.task = typer.prompt("Task")
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.persona.preflight import check_run
    from personae.project import Project
    from personae.settings import chosen_model
    from personae.team.treelink import check_cost_cap

    handover = request.handover
    project = Project.open(request.cwd)
    config = project.config
    model = chosen_model(request.model, request.settings, config.model)[0]
    request.link = _link(request)
    check_run(
        request.cwd, persona=request.persona, model=model,
        profile=request.profile or (handover.profile if handover else None),
        persona_place=request.persona_place,
    )  # fmt: skip
    cost, field = request.caps[1], "--max-cost"
    if cost is None:
        cost, field = config.limits.max_cost, "limits.max_cost"
    check_cost_cap(project.price_table(), model, cost, field=field)


def _link(request: _Request) -> Link:
    """The run that started this one: the environment (``PERSONAE_PARENT_RUN``,
    ``TRACEPARENT``, ``PERSONAE_BUDGET``), else the handover file's ``lineage``; the tighter
    budget of both. A malformed value is one line naming it."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.lineage import Link, inherited

    try:
        link = inherited()
        lineage = request.handover.handover.lineage if request.handover else None
        if lineage is not None:
            wire = lineage.model_dump(mode="json", by_alias=True)
            link = link.merged(Link.from_wire(wire, source=f"{request.context_from}: lineage"))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return link


@contextmanager
def _settled(db: Path, run_id: str, view: _View) -> Iterator[None]:
    """End the run in ``db`` when the body fails or exits non-zero before the run did."""
    try:
        yield
    except (typer.Exit, SystemExit) as done:
        code = done.exit_code if isinstance(done, typer.Exit) else done.code
        if code not in (0, None):
            _end(db, run_id, view, None)
        raise
    except BaseException as exc:
        closed = view.closed
        reason = _end(db, run_id, view, exc)
        if closed:  # the reader of stdout went away: a clean, quiet end
            raise typer.Exit(BROKEN_PIPE_EXIT) from None
        import asyncio  # local import: CLI start-up (asyncio loads only when a run does)

        if isinstance(exc, asyncio.CancelledError):
            raise KeyboardInterrupt from None
        if isinstance(exc, Exception) and reason is not None and reason != str(exc):
            raise RunError(reason) from exc  # the URL was added
        raise


def _run_options(request: _Request, task: str, announced: RunStarted) -> RunOptions:
    """The run's options: the Python API's defaults, so `personae run` and `Team.run`
    cannot drift."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.api.results import Limits
    from personae.api.team import Team

    handover = request.handover
    team = Team(
        root=request.cwd, model=request.model, settings=request.settings,
        profile=request.profile or (handover.profile if handover else None),
    )  # fmt: skip
    window, call_timeout, deadline = request.bounds
    tokens, cost = request.caps
    limits = Limits(max_retries=request.max_retries, max_requests=request.max_requests,
                    max_tokens=tokens, max_cost=cost,
                    window=window, call_timeout=call_timeout, deadline=deadline)  # fmt: skip
    options = dataclasses.replace(
        team.options(persona=request.persona, session=request.session, limits=limits),
        handover_text=handover.section_text if handover else None,
        announced=announced, link=request.link,
    )  # fmt: skip
    if handover is not None:
        options = dataclasses.replace(options, cast=_reconnected(request, handover, options.cast))
    return options


def _reconnected(request: _Request, handover: HandoverSession, cast: Cast | None) -> Cast | None:
    """The run's cast with the handover source's MCP servers its persona and project allow
    added to the persona (one stderr line per server: reconnected, or why not)."""
    context = handover.handover.context
    if not context.mcp_servers and not context.mcp_server_configs:
        return cast
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.handover.mcp_carry import reconnect_cast
    from personae.persona.preflight import run_cast
    from personae.project import Project

    mode = Project.open(request.cwd).config.handover.mcp_reconnect
    full = run_cast(request.cwd, cast=cast)
    updated, plan = reconnect_cast(full, request.persona, handover.handover, mode)
    for line in plan.notes():
        typer.echo(f"personae: {line}", err=True)
    return updated


def _turn(outcome: RunResult[Any]) -> HandoverTurn:
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.handover.work import HandoverTurn
    from personae.store.status import RunStatus

    return HandoverTurn(
        done=outcome.status is RunStatus.DONE, answer=outcome.answer,
        files=outcome.files_written, warnings=outcome.warnings,
    )  # fmt: skip


def _working_on(
    handover: HandoverSession | None, return_path: Path | None
) -> AbstractContextManager[HandoverWork]:
    """The run as the work on ``handover`` (:func:`personae.handover.runflow.working_on`);
    without one, nothing is written and no handover model loads."""
    if handover is None:
        # local import: CLI start-up (only the command that runs loads what it needs)
        from personae.handover.work import HandoverWork

        return nullcontext(HandoverWork())
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.handover.runflow import working_on

    return working_on(handover, return_path=return_path)


def _run_announced(request: _Request, view: _View, announced: RunStarted) -> None:
    """Everything ``personae run`` does after its run is stored and shown."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.project import Project

    handover = request.handover
    for warning in handover.warnings if handover else ():
        typer.echo(f"personae: warning: {warning}", err=True)
    task = request.task
    if not task:
        if request.non_interactive or not sys.stdin.isatty():
            raise typer.BadParameter("give a TASK (or --context-from a handover)")
        task = typer.prompt("Task")
    project = Project.open(request.cwd)
    options = _run_options(request, task, announced)
    settings = request.settings
    timeout = request.timeout if request.timeout is not None else (
        settings.handover_timeout if handover is not None else None
    )  # fmt: skip
    endpoint = settings.otel_endpoint or project.config.otel_endpoint
    try:
        with _working_on(handover, request.context_return) as work:
            try:
                outcome = _execute(task, options, view, timeout)
            except BaseException as exc:
                if endpoint and isinstance(exc, PersonaeError | TimeoutError):
                    export_trace(project.state_db, announced.run_id, endpoint)
                raise
            export_trace(project.state_db, outcome.run_id, endpoint)
            work.add(_turn(outcome))
            code = outcome.status.exit_code
            if handover is not None and not request.non_interactive and sys.stdin.isatty():
                for more in _follow_ups(outcome, options, view, timeout):
                    work.add(_turn(more))
                    code = max(code, more.status.exit_code)
    except TimeoutError as exc:
        _end(project.state_db, announced.run_id, view, exc)  # cancelled: timed out
        raise RunError(f"run took longer than {timeout} s") from None
    for warning in work.new_warnings:
        typer.echo(f"personae: warning: {warning}", err=True)
    if not view.as_json:
        if work.written is not None:
            typer.echo(f"handover results written to {work.written}")
        typer.echo(
            f"run {outcome.run_id} (session {outcome.session_id}, model "
            f"{outcome.model}); details: personae runs show {outcome.run_id}"
        )
    if code:  # partial or not validated: the answer is printed, the exit code tells scripts
        raise typer.Exit(code)


def _run_demo(*, as_json: bool, keep: Path | None) -> None:
    # local import: CLI start-up (only the command that runs loads what it needs)
    import asyncio

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
                "[yellow]Answers: SCRIPTED[/yellow] by a replay server (local, OpenAI-compatible, "
                "on 127.0.0.1) that replays the answers in\n"
                f"  {scenario}\n"
                "It is not a real language model; everything else (HTTP, provider code, tools, "
                "validation, storage) is real.\n"
                f"Task: {task}\nPersona: maintainer (may delegate to the scout sub-agent)\n"
            )
        options = RunOptions(
            root=target, persona="maintainer", model=f"scripted:{scenario}",
            include_git_log=False,
        )  # fmt: skip
        try:
            outcome = _execute(task, options, view)
        except asyncio.CancelledError:
            if not view.closed:
                raise KeyboardInterrupt from None
            raise typer.Exit(BROKEN_PIPE_EXIT) from None
        # local import: CLI start-up (only the command that runs loads what it needs)
        from personae.settings import PersonaeSettings

        export_trace(Layout(target).state_db, outcome.run_id,
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


def export_trace(db: Path, run_id: str, endpoint: str | None) -> None:
    """Send the stored run to the OpenTelemetry endpoint, when one is set (else nothing)."""
    if endpoint:
        # local import: CLI start-up (only the command that runs loads what it needs)
        from personae.telemetry import export_if_enabled

        try:
            export_if_enabled(db, run_id, endpoint)
        except PersonaeError as exc:  # the run is stored; a lost trace is only a warning
            typer.echo(f"personae: warning: {exc}", err=True)
