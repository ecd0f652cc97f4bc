"""``Team``: the team loop (Manager, Worker, Validator) from Python, sync and async.

A thin layer over :func:`personae.team.session.run_turn`, the code path of
``personae run``: the same project loading, model resolution, storage and
events. ``run_stream`` yields the run's events as the event bus emits them
(what ``personae run --json`` prints), the final answer's text deltas, then
the typed result.
"""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, Unpack, overload

from personae.api.results import AnswerDelta, Limits, RunEnd, StreamItem, TeamResult
from personae.context.profiles import ProfileSet
from personae.context.window import ContextWindow
from personae.errors import RunError, UsageError
from personae.models.given import given_resolver
from personae.models.resolve import ModelResolver
from personae.persona.cast import Cast
from personae.persona.model import Persona
from personae.project import Project
from personae.settings import PersonaeSettings, chosen_model
from personae.store.db import Store
from personae.store.runs import RunStore
from personae.store.status import RunStatus
from personae.team.events import AnswerStreamed, CallProgress
from personae.team.hooks import RunHooks
from personae.team.result import stored_result
from personae.team.runlog import end_run
from personae.team.session import RunOptions, run_store, run_turn
from personae.team.treelink import check_cost_cap
from personae.tools.base import Tool
from personae.tools.function import ToolLike, function_tools

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider
    from pydantic_ai.models import Model

    from personae.team.events import Event

__all__ = ["CancelToken", "Team", "TurnArgs"]

T = TypeVar("T")

_WINDOWS_KEPT = 64
"""Sessions whose context windows a :class:`Team` keeps (least recently used go first)."""


class CancelToken:
    """Cancels a running :class:`Team` run from anywhere (another thread or task).

    Pass it as ``cancel=`` to ``run``/``arun``/``run_stream``; ``cancel()`` ends the
    run at its next await: the stored run says ``cancelled`` and the result's
    status is ``cancelled``. Example::

        token = CancelToken()
        threading.Timer(5.0, token.cancel).start()
        result = team.run("...", cancel=token)
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._targets: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = []

    @property
    def cancelled(self) -> bool:
        """``cancel()`` was called."""
        return self._cancelled

    def cancel(self) -> None:
        """Cancel every run using this token (now, and any started later)."""
        with self._lock:
            self._cancelled = True
            targets = list(self._targets)
        for loop, task in targets:
            loop.call_soon_threadsafe(task.cancel)

    def _attach(self, task: asyncio.Task[Any]) -> None:
        with self._lock:
            self._targets.append((task.get_loop(), task))
            cancelled = self._cancelled
        if cancelled:
            task.cancel()

    def _detach(self, task: asyncio.Task[Any]) -> None:
        with self._lock:
            self._targets = [t for t in self._targets if t[1] is not task]


class TurnArgs(TypedDict, total=False):
    """The keywords of :meth:`Team.run`, :meth:`Team.arun` and :meth:`Team.run_stream`."""

    persona: str | None
    """Active persona (default: the team's)."""
    session: str | None
    """Continue this conversation (a ``result.session_id``)."""
    limits: Limits | None
    """Limits for this turn (default: the team's)."""
    cancel: CancelToken | None
    """Cancels the run: its result then has status ``cancelled``."""


@dataclass(kw_only=True)
class Team:
    """The personae team on one project folder.

    Build it with :meth:`from_project` (or directly). ``model`` is a
    ``provider:name`` spec (``openai:gpt-4o``, ``anthropic:claude-sonnet-4-5``,
    ``scripted:scenario.yaml`` for the scripted replay server); ``None`` takes
    ``PERSONAE_MODEL``, then the project config's ``model``, as ``personae run`` does.
    """

    root: Path
    """Project folder (tools act inside it; runs are stored in ``.personae/state.db``)."""
    model: str | Model | None = None
    """Default model: a ``provider:name`` spec (personas with their own ``model`` keep
    theirs), a model name with ``client`` or ``base_url``, or a pydantic-ai ``Model``
    object; a model given as an object or client answers every persona."""
    client: object = None
    """An ``openai.AsyncOpenAI`` or ``anthropic.AsyncAnthropic`` client the ``model`` (a
    name) is called over (``None``: the provider's from the environment)."""
    base_url: str | None = None
    """An OpenAI-compatible server the ``model`` (a name) is called on (with ``api_key``
    when it needs one)."""
    api_key: str | None = None
    """The key for ``base_url`` (``None``: none sent)."""
    persona: str | None = None
    """Default active persona (``run(persona=...)`` overrides it)."""
    limits: Limits = field(default_factory=Limits)
    """Default limits (``run(limits=...)`` overrides them)."""
    settings: PersonaeSettings | None = None
    """Settings (``None``: read from ``PERSONAE_*`` environment variables)."""
    persona_dirs: Sequence[Path] = ()
    """More persona folders to load besides the project's."""
    cast: Cast | None = None
    """The personas and skills to run with (``None``: :meth:`Cast.load` of ``root`` and
    ``persona_dirs`` at each run)."""
    profile: str | None = None
    """Context profile of the worker (builder, verifier ...)."""
    profiles: ProfileSet | None = None
    """The context profiles every role is assembled with (``None``: the built-in ones
    with the project's ``.personae/profiles.yaml``; see :func:`personae.load_profiles`)."""
    include_git_log: bool = True
    """Add recent commits to the context."""
    tools: Sequence[ToolLike] = ()
    """Python function tools (typed callables, sync or async) or :class:`Tool` objects,
    offered beside the built-in tools; a persona's ``tools`` list narrows them like the
    built-ins (a persona without a list gets them all)."""
    hooks: Sequence[RunHooks] = ()
    """Hooks around every model and tool call of a run (:class:`RunHooks`: they see each
    call and may veto it) and on every event."""
    instrument: bool | TracerProvider = False
    """Live OpenTelemetry spans of each run (``personae[otel]``): ``True`` through the global
    tracer provider, or through the ``TracerProvider`` given; ``False``: none."""
    store: Store | None = None
    """An open store the runs are recorded in, left open (:meth:`from_personas` keeps one
    in memory); ``None``: the project's ``.personae/state.db``."""
    builtin_tools: bool = True
    """Offer the built-in tools (files, shell, web) acting on ``root`` (off for a team
    from :meth:`from_personas` without a workspace)."""
    _tools: list[Tool[Any]] = field(default_factory=list, init=False, repr=False, compare=False)
    _hooks: list[RunHooks] = field(default_factory=list, init=False, repr=False, compare=False)
    _resolver: ModelResolver | None = field(default=None, init=False, repr=False, compare=False)
    _windows: OrderedDict[str, ContextWindow] = field(
        default_factory=OrderedDict, init=False, repr=False, compare=False
    )
    _windows_lock: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        self._tools = function_tools(self.tools)  # a bad tool is refused before any run
        self._resolver = given_resolver(
            self.model, client=self.client, base_url=self.base_url, api_key=self.api_key
        )
        self._hooks = list(self.hooks)
        bad = [type(h).__name__ for h in self._hooks if not isinstance(h, RunHooks)]
        if bad:
            raise UsageError(f"hooks must be RunHooks objects, got {', '.join(bad)}",
                             field="hooks")  # fmt: skip
        if self.instrument is not False:  # spans open first, so a veto after closes them
            self._hooks.insert(0, _live_spans(self.instrument))

    def window(self, session: str) -> ContextWindow | None:
        """The context window this team keeps for ``session`` (what its earlier turns in
        this process read and prepared, reused by the next), or ``None`` before its first
        turn here. The most recently used sessions' windows are kept."""
        with self._windows_lock:
            return self._windows.get(session)

    def _keep_window(self, session: str | None, window: ContextWindow) -> None:
        if not session:
            return
        with self._windows_lock:
            self._windows[session] = window
            self._windows.move_to_end(session)
            while len(self._windows) > _WINDOWS_KEPT:
                self._windows.popitem(last=False)

    @classmethod
    def from_project(
        cls,
        path: str | Path,
        *,
        model: str | Model | None = None,
        persona: str | None = None,
        limits: Limits | None = None,
        settings: PersonaeSettings | None = None,
        persona_dirs: Sequence[Path] = (),
        cast: Cast | None = None,
        profile: str | None = None,
        include_git_log: bool = True,
        tools: Sequence[ToolLike] = (),
        hooks: Sequence[RunHooks] = (),
        instrument: bool | TracerProvider = False,
        client: object = None,
        base_url: str | None = None,
        api_key: str | None = None,
    ) -> Team:
        """The team on the project folder ``path`` (a folder; ``.personae/`` is optional)."""
        root = Path(path)
        if not root.is_dir():
            raise UsageError("not a project folder", file=root)
        return cls(
            root=root, model=model, persona=persona, limits=limits or Limits(),
            settings=settings, persona_dirs=tuple(persona_dirs), cast=cast, profile=profile,
            include_git_log=include_git_log, tools=tuple(tools), hooks=tuple(hooks),
            instrument=instrument, client=client, base_url=base_url, api_key=api_key,
        )  # fmt: skip

    @classmethod
    def from_personas(
        cls,
        personas: Sequence[Persona],
        *,
        model: str | Model | None = None,
        workspace: str | Path | None = None,
        persona: str | None = None,
        tools: Sequence[ToolLike] = (),
        hooks: Sequence[RunHooks] = (),
        limits: Limits | None = None,
        settings: PersonaeSettings | None = None,
        instrument: bool | TracerProvider = False,
        client: object = None,
        base_url: str | None = None,
        api_key: str | None = None,
    ) -> Team:
        """A team of ``personas`` built in code, without a project folder: nothing is
        written anywhere. Its runs and conversations are kept in an in-memory store for
        the team's life (``team.store``; ``session=`` continues one). Without a
        ``workspace`` it reads no folder and offers only its function ``tools``; with one,
        the built-in tools act there (and may write there) and its files are read as a
        project's are. ``persona`` defaults to the first of ``personas``."""
        cast = Cast()
        for one in personas:
            if not isinstance(one, Persona):
                raise UsageError(f"personas must be Persona objects, got {type(one).__name__}",
                                 field="personas")  # fmt: skip
            if one.name in cast.personas:
                raise UsageError(f"two personas are named {one.name!r}", field="personas")
            cast.personas[one.name] = one
        if not cast.personas:
            raise UsageError("give at least one persona", field="personas")
        if workspace is not None and not Path(workspace).is_dir():
            raise UsageError("not a folder", file=workspace, field="workspace")
        # no folder: a path that does not exist and that nothing creates (no built-in
        # tools act on it, the store is in memory)
        root = Path(workspace) if workspace is not None else (
            Path(tempfile.gettempdir()) / f"personae-no-folder-{uuid.uuid4().hex}"
        )  # fmt: skip
        return cls(
            root=root, model=model, persona=persona or next(iter(cast.personas)),
            limits=limits or Limits(), settings=settings, cast=cast, tools=tuple(tools),
            hooks=tuple(hooks), instrument=instrument, client=client, base_url=base_url,
            api_key=api_key, include_git_log=workspace is not None,
            store=Store(":memory:", url=""), builtin_tools=workspace is not None,
        )  # fmt: skip

    def options(
        self, *, persona: str | None = None, session: str | None = None,
        limits: Limits | None = None,
    ) -> RunOptions:  # fmt: skip
        """The :class:`~personae.team.session.RunOptions` a run uses (defaults resolved)."""

        settings = self.settings or PersonaeSettings()
        chosen = limits or self.limits
        _check_bounds(chosen)
        project = Project.open(self.root)
        model = (
            self._resolver.fixed_label if self._resolver is not None
            else chosen_model(_spec(self.model), settings, project.config.model)[0]
        )  # fmt: skip
        cost = chosen.max_cost if chosen.max_cost is not None else project.config.limits.max_cost
        check_cost_cap(project.price_table(), model, cost, field="max_cost")
        return RunOptions(
            root=project.root,
            persona=persona or self.persona,
            model=model,
            session=session,
            max_retries=settings.max_retries if chosen.max_retries is None else chosen.max_retries,
            budget_share=(
                settings.budget_share if chosen.budget_share is None else chosen.budget_share
            ),
            request_cap=chosen.max_requests,
            token_cap=chosen.max_tokens,
            tool_call_cap=chosen.max_tool_calls,
            cost_cap=chosen.max_cost,
            tools=self._tools,
            hooks=tuple(self._hooks),
            store=self.store,
            builtin_tools=self.builtin_tools,
            include_git_log=self.include_git_log,
            profile=self.profile,
            profiles=self.profiles,
            extra_persona_dirs=tuple(self.persona_dirs),
            handover_timeout=settings.handover_timeout,
            cast=self.cast,
            model_window=chosen.window,
            call_timeouts=(
                None if chosen.call_timeout is None
                else dict.fromkeys(ROLES_WITH_TIMEOUTS, chosen.call_timeout)
            ),
            deadline=chosen.deadline,
        )  # fmt: skip

    @overload
    def run(
        self, task: str, *, output_type: type[T], **turn: Unpack[TurnArgs]
    ) -> TeamResult[T]: ...

    @overload
    def run(self, task: str, *, output_type: None = None,
            **turn: Unpack[TurnArgs]) -> TeamResult[str]: ...  # fmt: skip

    def run(
        self, task: str, *, output_type: Any = None, **turn: Unpack[TurnArgs]
    ) -> TeamResult[Any]:
        """Run one team turn on ``task`` and wait for it (blocking; not inside an event loop).

        Keywords (:class:`TurnArgs`): ``persona``, ``session`` (continues a
        conversation: ``result.session_id``), ``limits`` and ``cancel``.
        ``output_type`` (a pydantic model, or any type pydantic validates) asks for the
        final answer as that type: ``result.output`` is the validated value; an answer
        that does not parse (after one retry) is a :class:`AnswerTypeError`. Errors are
        :class:`personae.PersonaeError` (bad config, unknown persona, model failures).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(task, output_type=output_type, **turn))
        raise UsageError("Team.run blocks; inside an event loop use 'await team.arun(...)'")

    @overload
    async def arun(
        self, task: str, *, output_type: type[T], **turn: Unpack[TurnArgs]
    ) -> TeamResult[T]: ...

    @overload
    async def arun(self, task: str, *, output_type: None = None,
                   **turn: Unpack[TurnArgs]) -> TeamResult[str]: ...  # fmt: skip

    async def arun(
        self, task: str, *, output_type: Any = None, **turn: Unpack[TurnArgs]
    ) -> TeamResult[Any]:
        """Async :meth:`run`. Cancelling the awaiting task cancels the run (and raises
        ``CancelledError``); a ``cancel`` token or the ``limits.timeout`` returns a result
        with status ``cancelled``."""
        result: TeamResult[Any] | None = None
        async for item in self.run_stream(
            task, answer_deltas=False, output_type=output_type, **turn
        ):
            if isinstance(item, RunEnd):
                result = item.result
        if result is None:  # run_stream always ends with RunEnd or raises
            raise RuntimeError("run ended without a result")
        return result

    async def run_stream(
        self, task: str, *, answer_deltas: bool = True, output_type: Any = None,
        **turn: Unpack[TurnArgs],
    ) -> AsyncIterator[StreamItem]:  # fmt: skip
        """Run one turn, yielding its events as they happen.

        Yields :class:`personae.Event` objects in ``seq`` order (the ones
        ``personae run --json`` prints, from ``start`` to ``final``),
        :class:`AnswerDelta` pieces of the final answer while the model streams
        it (``answer_deltas``), and last one :class:`RunEnd` with the result.
        Leaving the loop early (``break``) cancels the run. ``output_type`` as in
        :meth:`run` (the typed answer is not streamed: no deltas then).
        """
        unknown = sorted(set(turn) - TurnArgs.__optional_keys__)
        if unknown:  # what a keyword-only signature would refuse
            raise TypeError(f"unexpected keyword argument(s): {', '.join(unknown)}")
        limits, cancel = turn.get("limits"), turn.get("cancel")
        session = turn.get("session")
        options = self.options(persona=turn.get("persona"), session=session, limits=limits)
        kept = self.window(session) if session else None
        window = kept if kept is not None else ContextWindow()  # an empty window is falsy
        # local import: the engine (pydantic-ai) loads after the run's first request is sent
        from personae.team.structured import AnswerType

        answer = None if output_type in (None, str) else AnswerType.of(output_type)
        options = dataclasses.replace(options, window=window, answer=answer)
        feed = _Feed(answer_deltas=answer_deltas)
        timeout = (limits or self.limits).timeout
        runner = asyncio.create_task(feed.run(task, options, timeout, cancel, self._resolver))
        if cancel is not None:
            cancel._attach(runner)
        try:
            while True:
                item = await feed.queue.get()
                if item is None:
                    break
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, RunEnd):  # the session's next turn reuses the window
                    self._keep_window(item.result.session_id, window)
                yield item
        finally:
            if cancel is not None:
                cancel._detach(runner)
            if not runner.done():
                runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)


def _spec(model: str | Model | None) -> str | None:
    """The spec of a model given as a string (a model object has a resolver instead)."""
    return model if isinstance(model, str) else None


def _live_spans(instrument: bool | TracerProvider) -> RunHooks:
    """The hooks that make a run's OpenTelemetry spans as it runs."""
    try:
        # local import: optional extra personae[otel], loaded only when a team is instrumented
        from personae.telemetry.live import LiveSpans
    except ImportError as exc:
        raise UsageError(
            f"instrument needs OpenTelemetry ({exc.name} is not installed): "
            "pip install 'personae[otel]'", field="instrument",
        ) from None  # fmt: skip
    return LiveSpans(instrument if not isinstance(instrument, bool) else None)


ROLES_WITH_TIMEOUTS = ("manager", "worker", "validator", "subagent", "summarizer")
"""Roles whose model calls ``Limits.call_timeout`` bounds."""


def _check_bounds(limits: Limits) -> None:
    """Refuse a window, call timeout or deadline the CLI would refuse, naming it."""
    if limits.window is not None and limits.window < 256:
        raise UsageError(f"window must be at least 256 tokens (got {limits.window})",
                         field="window")  # fmt: skip
    for name in ("call_timeout", "deadline", "max_requests", "max_tokens"):
        value = getattr(limits, name)
        if value is not None and not value > 0:
            raise UsageError(f"{name} must be above zero (got {value})", field=name)
    if limits.max_tool_calls is not None and limits.max_tool_calls < 0:
        raise UsageError(f"max_tool_calls must be 0 or more (got {limits.max_tool_calls})",
                         field="max_tool_calls")  # fmt: skip


class _Feed:
    """The items of one streamed run, queued for the consumer as the run produces them.

    Created in the consumer's event loop; events may arrive from other threads.
    ``None`` in the queue ends the stream; an exception in it is raised to the consumer.
    """

    def __init__(self, *, answer_deltas: bool) -> None:
        self.queue: asyncio.Queue[StreamItem | BaseException | None] = asyncio.Queue()
        self.answer_deltas = answer_deltas
        self.seen: list[Event] = []
        self._loop = asyncio.get_running_loop()
        self._owner = threading.get_ident()
        self._deltas = 0

    def put(self, item: StreamItem) -> None:
        """Queue ``item`` (thread-safe)."""
        if threading.get_ident() == self._owner:
            self.queue.put_nowait(item)
        else:
            self._loop.call_soon_threadsafe(self.queue.put_nowait, item)

    def on_event(self, event: Event) -> None:
        """A bus listener: events as they are, answer pieces as typed deltas."""
        if isinstance(event, CallProgress):  # for live views; the stored calls say it all
            return
        if isinstance(event, AnswerStreamed):  # typed pieces, not bus events
            if self.answer_deltas:
                self.put(AnswerDelta(run_id=event.run_id, index=self._deltas, text=event.text))
                self._deltas += 1
            return
        self.seen.append(event)
        self.put(event)

    async def run(
        self, task: str, options: RunOptions, timeout: float | None, cancel: CancelToken | None,
        resolver: ModelResolver | None = None,
    ) -> None:  # fmt: skip
        """Run the turn (with the caller's model when ``resolver`` is given); queue its end
        (a result, a cancelled result, or the error)."""
        queue = self.queue
        deadline = None if not timeout else time.monotonic() + timeout

        def why() -> str:  # asked by the run as it is cancelled, and below
            if cancel is not None and cancel.cancelled:
                return "cancelled from the Python API"
            if timeout and deadline is not None and time.monotonic() >= deadline:
                return f"timed out (limits.timeout {timeout:g} s)"
            return "stopped by the caller (the stream was left or its task cancelled)"

        options = dataclasses.replace(options, cancel_reason=why)
        try:
            coro = run_turn(task, options, listeners=[self.on_event], resolver=resolver)
            result = await (asyncio.wait_for(coro, timeout) if timeout else coro)
            queue.put_nowait(RunEnd(result=result))
        except (asyncio.CancelledError, TimeoutError) as exc:
            result = _cancelled(options, self.seen, why())
            if isinstance(exc, TimeoutError) or (cancel is not None and cancel.cancelled):
                queue.put_nowait(RunEnd(result=result))
            else:
                queue.put_nowait(exc)
        except BaseException as exc:
            queue.put_nowait(exc)
        finally:
            queue.put_nowait(None)


def _cancelled(options: RunOptions, seen: list[Event], reason: str) -> TeamResult[Any]:
    """The result of a run ended by a cancel token or its timeout: the run is ended as
    cancelled and its result read back as stored (its ``final`` event joins ``seen``, the
    events the caller was given). A run stopped before it was stored has no result: that
    raises :class:`~personae.errors.RunError` with the reason."""
    if not seen:
        raise RunError(f"{reason}: the run stopped before it was stored")
    with run_store(Project.open(options.root), options) as store:
        runs = RunStore(store)
        final = end_run(runs, seen[0].run_id, status=RunStatus.CANCELLED, reason=reason)
        if final is not None:
            seen.append(final)
        result = stored_result(runs, seen[0].run_id)
    if result is None:  # end_run gives every run it ends a final event
        raise RunError(f"run {seen[0].run_id} ended ({reason}) without a final event")
    return result
