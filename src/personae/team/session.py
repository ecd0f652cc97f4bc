"""One ``personae run`` turn on a project: load everything, run the team, store it all.

:func:`run_turn` opens the project store, loads the cast and the built-in
tools, resolves the model, builds the turn's snapshot from the session's
conversation, runs the team, appends the turn (user task, tool calls with
results, final answer) to the session so the next run sees it, and records
the run and its events.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from personae.context.profiles import ProfileSet, load_profiles
from personae.context.snapshot import SnapshotOptions, history_window
from personae.context.summary import SummaryRefresh, extractive_summary, refresh_summary
from personae.context.window import ContextWindow
from personae.errors import PersonaeError, RunError, UsageError
from personae.limits import DEFAULTS
from personae.lineage import Budget as Caps
from personae.lineage import Link, Running, running
from personae.lineage import inherited as inherited_link
from personae.models.facts import ModelFacts
from personae.models.resolve import ModelResolver
from personae.persona.cast import Cast
from personae.persona.model import Persona
from personae.persona.preflight import active_persona, profile_name, run_cast
from personae.project import Project, SandboxConfig
from personae.store.conversations import ConversationStore, Message, ToolCall
from personae.store.db import Store
from personae.store.replays import ReplayStore
from personae.store.runs import RunStore
from personae.store.status import RunStatus
from personae.team.budget_calibration import calibrated_budget, learn_from_run
from personae.team.events import (
    Event,
    EventBus,
    RunFinished,
    RunStarted,
    RunWarning,
    event_from_json,
)
from personae.team.hooks import HookGate, RunHooks
from personae.team.plan_request import send_plan_early
from personae.team.result import RunResult
from personae.team.run_inputs import capture_inputs
from personae.team.runlog import attach_run, describe_failure, end_run, start_run
from personae.team.toolbox import narrow_names, persona_limits
from personae.team.treelink import child_usage, link_run, tree_caps
from personae.team.turn_context import TurnContext
from personae.tokens.registry import counter_for_model
from personae.tools.base import Tool
from personae.tools.sandbox import describe_mode
from personae.tools.workspace import Workspace

if TYPE_CHECKING:  # the engine (pydantic-ai, the OpenAI SDK) loads after the first request
    from personae.team.bounds import CallBounds
    from personae.team.loop import TeamLoop
    from personae.team.runtime import Runtime, TreeUsage
    from personae.team.structured import AnswerType
    from personae.team.summarizer import SummaryCalls
    from personae.tools.registry import ToolRegistry

__all__ = ["RunOptions", "extractive_summary", "run_store", "run_turn"]

_HANDOVER = "handover_to_persona"
"""The handover tool's name (personae.handover.tool is imported only when it is used)."""


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """What one run needs besides the task."""

    root: Path
    """Project root (working directory)."""
    persona: str | None = None
    """Active persona name."""
    model: str | None = None
    """Default model spec (flag > PERSONAE_MODEL > project config, resolved by the caller)."""
    session: str | None = None
    """Conversation session id (created when new; a fresh one when ``None``)."""
    max_retries: int = DEFAULTS.max_retries
    """Corrections per subtask."""
    budget_share: float = DEFAULTS.budget_share
    """Share of the model window the assembled context may use."""
    request_cap: int | None = None
    """Most model requests for the whole tree of agents and child runs (``None``: the
    config's ``limits.max_requests``, else no cap)."""
    token_cap: int | None = None
    """Most input plus output tokens for the whole tree of agents and child runs
    (``--max-tokens-total``; ``None``: the config's ``limits.max_tokens_total``, else no
    cap)."""
    tool_call_cap: int | None = None
    """Most tool calls for the whole tree of agents (``None``: no cap)."""
    cost_cap: float | None = None
    """Most cost for the whole tree, by the config's ``prices:`` (``--max-cost``; ``None``:
    the config's ``limits.max_cost``, else no cap)."""
    tools: Sequence[Tool[Any]] = ()
    """Tools besides the built-in ones (Python function tools); a persona's ``tools``
    list narrows them like the built-ins."""
    hooks: Sequence[RunHooks] = ()
    """Hooks around every model and tool call (they may veto one) and on every event."""
    link: Link | None = None
    """The run that started this one and the caps it passed down (``None``: read from the
    environment, :func:`personae.lineage.inherited`)."""
    answer: AnswerType | None = None
    """The type the final answer is asked for and validated as (``None``: text)."""
    store: Store | None = None
    """An open store the run is recorded in, left open (a team kept in memory);
    ``None``: the project's ``.personae/state.db``."""
    builtin_tools: bool = True
    """Offer the built-in tools (files, shell, web) acting on ``root``; off for a team
    without a folder (only its function tools then)."""
    handover_text: str | None = None
    """Rendered handover section, when the run continues a handover."""
    include_git_log: bool = True
    """Add recent commits to the context."""
    profile: str | None = None
    """Context profile of the worker (builder, verifier ...); ``None``: the persona's
    ``profile``, else the ``worker`` profile."""
    profiles: ProfileSet | None = None
    """The context profiles the run's roles are assembled with (``None``: the built-in
    ones with the project's ``.personae/profiles.yaml``)."""
    extra_persona_dirs: Sequence[Path] = ()
    """More persona folders to load."""
    handover_timeout: float = DEFAULTS.handover_timeout
    """Seconds a ``handover_to_persona`` child run may take (per attempt)."""
    announced: RunStarted | None = None
    """The ``start`` event already stored and shown for this run
    (:func:`personae.team.runlog.start_run`); ``None``: the run starts its own."""
    cancel_reason: Callable[[], str] | None = None
    """Asked why, when a run that started itself is cancelled (the Python API: its cancel
    token, ``limits.timeout``, or the caller left); ``None``: "cancelled (interrupted or
    out of time)". The run's ``final`` event and stored error carry the answer."""
    cast: Cast | None = None
    """The cast to run with (``None``: loaded from ``root`` and ``extra_persona_dirs``);
    not changed by the run."""
    model_window: int | None = None
    """The model's window in tokens (``--window``); ``None``: the config's ``models:``
    entry, what the server tells, else personae's table (then the run warns it guessed)."""
    call_timeouts: Mapping[str, float] | None = None
    """Seconds each role's call may take (``--call-timeout`` sets every role); ``None``:
    the config's ``timeouts:``, else the defaults."""
    deadline: float | None = None
    """Seconds the run may take (``--deadline``); ``None``: the config's ``timeouts.run``,
    else the default."""
    workspace: Path | None = None
    """The folder the run's context is read from and its tools act on (``None``: the
    project root); a replay works on a copy of the project as the replayed run saw it."""
    window: ContextWindow | None = None
    """The session's context window, kept by a caller that runs several turns of the
    session in one process (``personae.Team`` does): what earlier turns read and
    prepared is reused. ``None``: a fresh one (same result, prepared from scratch)."""


def _persona_texts(cast: Cast, persona: Persona | None) -> tuple[str | None, str | None, str]:
    if persona is None:
        return None, None, ""
    agents = ""
    others = cast.spawnable(persona.name)
    agents = cast.available_agents_xml(others) if others else ""
    return cast.execution_block(persona.name), cast.validation_context(persona.name), agents


async def _refresh_summary(
    root: Path,
    conversations: ConversationStore,
    session: str,
    models: ModelResolver,
    persona: Persona | None,
    *,
    calls: list[SummaryCalls],
    run_persona: str | None,
) -> SummaryRefresh:
    """Path A: fold newly evicted messages into the stored summary with the run's model
    (``calls`` gets what keeps the model call for the run's usage and record)."""
    model = persona.model if persona else None

    def call(request: str) -> Awaitable[str]:
        # local import: the engine loads only when a summary is asked of the model
        from personae.team.summarizer import SummaryCalls, model_summarize

        if not calls:
            calls.append(SummaryCalls(persona=run_persona))
        return model_summarize(models, model, request, calls=calls[0])

    recent = history_window(load_profiles(root))
    return await refresh_summary(conversations, session, conversations.counter, call, recent=recent)


def _store_turn(
    conversations: ConversationStore, session: str, task: str, turn: TurnContext, final: str
) -> None:
    batch: list[Message] = [Message(role="user", content=task)]
    for m in turn.turn_messages:
        if m.role == "assistant" and m.tool_calls:
            calls = [
                ToolCall(id=c.id, name=c.name, args=_json_args(c.arguments)) for c in m.tool_calls
            ]
            batch.append(Message(role="assistant", content=m.content, tool_calls=calls))
        elif m.role == "tool":
            batch.append(Message(role="tool", content=m.content, tool_call_id=m.tool_call_id))
    batch.append(Message(role="assistant", content=final))
    conversations.append_many(session, batch)


def _json_args(text: str) -> dict[str, object]:
    try:
        value = json.loads(text) if text else {}
    except json.JSONDecodeError:
        return {"raw": text}
    return value if isinstance(value, dict) else {"value": value}


def _registry(
    root: Path,
    cast: Cast,
    persona: Persona | None,
    options: RunOptions,
    session: str,
    *,
    sandbox: SandboxConfig | None = None,
) -> ToolRegistry:
    """The built-in tools, plus ``handover_to_persona`` when a persona may use it.

    The handover tool hands work to another persona in a child ``personae run``
    (its source is the active persona; the child's default model is this run's).
    It is left out below the handover depth cap, so the narrow-only subset
    refuses it there.
    """
    # local import: the tools' engine side loads after the run's first request
    from personae.tools.registry import ToolRegistry

    limits = persona_limits(sandbox or SandboxConfig(), persona)
    if not options.builtin_tools:  # no folder to act on: the caller's tools only
        place = Workspace(root) if root.is_dir() else Workspace.absent(root)
        registry = ToolRegistry(place, limits=limits)
        for tool in options.tools:
            registry.register(tool)
        return registry
    registry = ToolRegistry.builtin(Workspace(root), limits=limits)
    for tool in options.tools:  # names checked by personae.tools.function.function_tools
        registry.register(tool)
    if persona is None or not any(
        _HANDOVER in narrow_names(p, {_HANDOVER}) for p in (persona, *cast.personas.values())
    ):
        return registry

    # local import: the handover tool loads only for a persona that may hand over
    from personae.handover.child import HANDOVER_DEPTH_CAP, ChildOptions, handover_depth
    from personae.handover.tool import register_handover_tool

    if handover_depth() < HANDOVER_DEPTH_CAP:
        register_handover_tool(
            registry,
            persona.name,
            session_id=session,
            child=ChildOptions(timeout=options.handover_timeout, model=options.model),
        )
    return registry


@contextmanager
def run_store(project: Project, options: RunOptions) -> Iterator[Store]:
    """The caller's open store (left open), else the project's (closed after the run)."""
    if options.store is not None:
        yield options.store
        return
    with Store(project.state_db) as store:
        yield store


def _open_session(conversations: ConversationStore, options: RunOptions, task: str) -> str:
    """The run's conversation session (``options.session``, created when new)."""
    session = options.session or uuid.uuid4().hex[:12]
    if session not in {s.id for s in conversations.sessions()}:
        conversations.create_session(session_id=session, persona=options.persona, title=task[:80])
    return session


@dataclass(frozen=True, kw_only=True)
class _Recording:
    """Where a run's events go: the stored run, its bus and the tree's usage."""

    runs: RunStore
    run_id: str
    bus: EventBus
    usage: TreeUsage
    runtime: Runtime
    announced: bool
    """The caller started the run (``RunOptions.announced``) and ends it when cancelled."""
    me: Running
    """The run as the runs it starts link to it (id, trace, span, budget left)."""
    cancel_reason: Callable[[], str] | None
    """Why the run was cancelled, when it ends it (``RunOptions.cancel_reason``)."""


def _start_recording(
    store: Store,
    project: Project,
    options: RunOptions,
    task: str,
    *,
    label: str,
    session: str,
    models: ModelResolver,
    listeners: Sequence[Callable[[Event], None]],
    sandbox: str,
    bounds: CallBounds,
) -> _Recording:
    """Start (or take over the announced) run, wire its event bus (store, then listeners)
    and emit ``start`` to whoever has not seen it."""
    # local import: the engine (pydantic-ai) loads after the run's first request is sent
    from personae.team.runtime import Runtime, TreeUsage

    runs = RunStore(store)
    link = options.link if options.link is not None else _inherited()  # before anything is stored
    started = options.announced
    if started is None:
        started = start_run(
            runs, task=task, persona=options.persona, session=session, sandbox=sandbox
        )
    attach_run(runs, started, task=task, model=label, session=session)
    bus = EventBus(started.run_id)
    asked = Caps(tokens=options.token_cap, cost=options.cost_cap, calls=options.request_cap)
    caps = tree_caps(asked, project.config.limits, link.budget)
    prices = project.price_table()
    usage = TreeUsage(
        request_cap=caps.calls, token_cap=caps.tokens, cost_cap=caps.cost, prices=prices,
        tool_call_cap=options.tool_call_cap, outside=child_usage(runs, started.run_id, prices),
    )  # fmt: skip
    me = link_run(runs, started.run_id, link, caps)
    gate = HookGate(hooks=tuple(options.hooks), emit=bus.emit, run_id=started.run_id)
    runtime = Runtime(models=models, bus=bus, runs=runs, usage=usage, bounds=bounds, hooks=gate)
    bus.subscribe(runtime.store_event)
    for hook in options.hooks:  # hooks see every event, the start included
        bus.subscribe(hook.on_event)
    if options.announced is not None:  # already shown: don't show it again
        bus.adopt(started)
    for listener in listeners:
        bus.subscribe(listener)
    if options.announced is None:
        bus.adopt(started)
    return _Recording(
        runs=runs, run_id=started.run_id, bus=bus, usage=usage, runtime=runtime,
        announced=options.announced is not None, cancel_reason=options.cancel_reason,
        me=dataclasses.replace(me, budget_left=usage.left),
    )  # fmt: skip


def _inherited() -> Link:
    """The link this process was started with (one line naming a malformed variable)."""
    try:
        return inherited_link()
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _team(
    project: Project,
    cast: Cast,
    persona: Persona | None,
    options: RunOptions,
    *,
    session: str,
    runtime: Runtime,
    workspace: Path,
) -> TeamLoop:
    """The Manager, Worker and Validator of the run, with the project's tools and config
    (the tools act on ``workspace``)."""
    # local import: the engine (pydantic-ai) loads after the run's first request is sent
    from personae.team.loop import TeamConfig, TeamLoop

    registry = _registry(workspace, cast, persona, options, session, sandbox=project.config.sandbox)
    return TeamLoop(
        runtime=runtime,
        persona=persona,
        personas=cast.personas,
        box=registry.subset(record=False),  # the team's recording wrapper logs the calls
        workspace=workspace,
        config=TeamConfig(max_retries=options.max_retries),
        mcp_servers=cast.mcp_servers,
        skills=cast.skills,
        commands=project.config.commands,
        sandbox=project.config.sandbox,
        answer=options.answer,
    )  # fmt: skip


async def _run_team(
    make_team: Callable[[], TeamLoop], turn: TurnContext, rec: _Recording
) -> tuple[RunFinished, Any]:
    """Run the team on ``turn``; a failed run is ended here (its ``final`` event says why).

    A cancelled one (interrupted, out of time) is ended here too unless the caller started
    it: the caller knows why (:func:`personae.team.runlog.end_run`)."""
    runtime, runs, run_id, usage = rec.runtime, rec.runs, rec.run_id, rec.usage
    try:
        ended = await make_team().run_turn(turn)
    except asyncio.CancelledError:
        if not rec.announced:
            asked = rec.cancel_reason
            reason = asked() if asked is not None else "cancelled (interrupted or out of time)"
            end_run(runs, run_id, status=RunStatus.CANCELLED, reason=reason,
                    usage=usage.as_dict(), bus=rec.bus)  # fmt: skip
        runtime.flush()
        raise
    except Exception as exc:
        status, reason = describe_failure(exc)
        if not isinstance(exc, PersonaeError):
            reason = f"run {run_id} failed: {type(exc).__name__}: {reason}"
        end_run(runs, run_id, status=status, reason=reason, usage=usage.as_dict(), bus=rec.bus)
        runtime.flush()
        if isinstance(exc, PersonaeError):
            raise
        raise RunError(reason, run_id=run_id) from exc
    runtime.flush()
    return ended


def _configure(models: ModelResolver, project: Project, options: RunOptions) -> None:
    """Give the resolver the config's ``models:`` entries and the ``--window`` flag (a
    caller's resolver keeps what it was given)."""
    if not models.entries:
        models.entries = dict(project.config.models)
    if options.model_window is not None:
        models.window = options.model_window


def _bounds(project: Project, options: RunOptions) -> CallBounds:
    """The run's call timeouts (flag, else config) and deadline (flag, config, default)."""
    config = project.config.timeouts
    timeouts = dict(config.per_role())
    timeouts.update(options.call_timeouts or {})
    deadline = options.deadline or config.run or DEFAULTS.run_deadline
    # local import: the engine (pydantic-ai) loads after the run's first request is sent
    from personae.team.bounds import CallBounds

    return CallBounds(timeouts=timeouts, deadline=deadline)


def _may_send_early(
    project: Project, options: RunOptions, models: ModelResolver, label: str
) -> bool:
    """The run's first request (the plan) may be sent before the engine loads: no hook may
    veto it, the Manager runs on the run's model, and no cap is spent already."""
    try:
        if options.hooks or models.label(None) != label:
            return False
    except PersonaeError:  # no default model: the Manager's call fails as it always did
        return False
    link = options.link if options.link is not None else _inherited()
    asked = Caps(tokens=options.token_cap, cost=options.cost_cap, calls=options.request_cap)
    caps = tree_caps(asked, project.config.limits, link.budget)
    return all(cap is None or cap > 0 for cap in (caps.tokens, caps.cost, caps.calls))


def window_warning(facts: ModelFacts) -> RunWarning:
    """The one warning a run gives when its model's window is a guess."""
    return RunWarning(
        message=f"the window of {facts.label} is a guess: {facts.window:,} tokens from "
        f"{facts.window_source} ({facts.where} did not tell); pass --window N or set "
        "context_window in the model's models: entry of .personae/config.yaml",
        action="window_guessed",
        details={"model": facts.label, "window": facts.window, "source": facts.window_source},
    )


async def run_turn(
    task: str,
    options: RunOptions,
    *,
    listeners: Sequence[Callable[[Event], None]] = (),
    resolver: ModelResolver | None = None,
) -> RunResult[Any]:
    """Run one team turn on the project at ``options.root``; returns its result (as stored:
    :func:`personae.team.result.stored_result` reads the same back).

    Listeners get every event, the final answer's ``answer_delta`` pieces included.
    """
    project = Project.open(options.root)
    cast = run_cast(
        project.root, cast=options.cast, extra_dirs=options.extra_persona_dirs,
        tools=[t.name for t in options.tools],
    )  # fmt: skip
    persona = active_persona(cast, options.persona)
    profile = profile_name(project.root, options.profile, persona)
    models = resolver or ModelResolver(default=options.model, base_url=project.config.base_url)
    _configure(models, project, options)
    label = models.label(persona.model if persona else None)
    counter = counter_for_model(label)
    facts = models.facts(persona.model if persona else None)
    with run_store(project, options) as store:
        budget, narrowed = calibrated_budget(store, label, facts.window, options.budget_share)
        conversations = ConversationStore(store, counter)
        session = _open_session(conversations, options, task)
        history_seq = conversations.position(session)[1]
        work = options.workspace or project.root
        execution, validation, agents = _persona_texts(cast, persona)
        summary_calls: list[SummaryCalls] = []  # the summary's model call, if it made one
        refresh = await _refresh_summary(
            project.root, conversations, session, models, persona, calls=summary_calls,
            run_persona=options.persona,
        )  # fmt: skip
        turn = TurnContext.build(
            work,
            SnapshotOptions(
                task=task,
                conversations=conversations,
                session=session,
                summarizer=extractive_summary if refresh.ok else None,
                warnings=[w for w in (refresh.warning, refresh.notice, narrowed) if w],
                persona=persona.name if persona else None,
                execution_block=execution,
                validation_context=validation,
                handover=options.handover_text,
                include_git_log=options.include_git_log,
                window=options.window,
                profiles=options.profiles,
            ),
            counter=counter,
            budget=budget,
            available_agents=agents,
            profile=profile,
        )
        if _may_send_early(project, options, models, label):
            send_plan_early(models, turn, persona)  # while the engine loads
        bounds = _bounds(project, options)
        rec = _start_recording(
            store, project, options, task, label=label, session=session, models=models,
            listeners=listeners, sandbox=describe_mode(project.config.sandbox.mode),
            bounds=bounds,
        )  # fmt: skip
        ReplayStore(store).save_inputs(
            rec.run_id,
            capture_inputs(vars(options), root=work, session=session, history_seq=history_seq),
        )
        if facts.guessed:
            rec.runtime.emit(window_warning(facts))
        for calls in summary_calls:  # the summary's model call counts and is stored too
            calls.adopt(rec.runtime)

        def make_team() -> TeamLoop:
            return _team(project, cast, persona, options, session=session, runtime=rec.runtime,
                         workspace=work)  # fmt: skip

        try:
            with running(rec.me):  # child runs started meanwhile link to this one
                final, output = await _run_team(make_team, turn, rec)
        finally:
            if models.early is not None:  # hung up on, unless the plan call read it
                models.early.discard()
            if resolver is None:
                models.close()
        _store_turn(conversations, session, task, turn, final.message)
        learn_from_run(store, rec.runtime.input_counts)
        end_run(rec.runs, rec.run_id, status=final.status, usage=final.usage, bus=rec.bus)
    stored = [event_from_json(e.to_json_dict()) for e in rec.bus.events]  # as the store has them
    return RunResult.of(
        final, session_id=session, model=label, events=stored, output=output,
        typed=options.answer is not None,
    )  # fmt: skip
