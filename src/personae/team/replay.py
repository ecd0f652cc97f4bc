"""Replay a stored run: the same task and project, and from one call on another model or prompt.

:func:`replay_run` re-runs a stored run as a new run linked to it (``replay_of``). The
replay gets what the original was started with (:mod:`personae.team.run_inputs`): the
task, persona, profile, handover text, the conversation up to where the run started (copied
into a fresh session, so the original's is left alone) and a copy of the project as the
run saw it (files created since are left out; a file changed since is named). Its model
calls before ``from_call`` are answered from the record: the stored answer comes back
without contacting a model, with the stored token figures. From ``from_call`` on, calls go
to the given model (or the original's) with the given persona prompt (or the original's).

Everything a replay needs is checked before anything is stored: an unknown run, a call
number out of range, a recorded call without a stored answer, an unreadable prompt file
or a model spec that does not resolve is a :class:`~personae.errors.UsageError`.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    ModelResponsePart,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from personae.errors import UsageError
from personae.fsutil import read_regular
from personae.models.resolve import ModelResolver, ModelSpec, parse_model_spec
from personae.persona.preflight import run_cast
from personae.project import Project
from personae.store.conversations import ConversationStore
from personae.store.db import Store, store_present
from personae.store.replays import RecordedCall, ReplayLink, ReplayStore, RunInputs
from personae.store.runs import ModelCallRecord, RunRecord, RunStore
from personae.store.status import RunStatus
from personae.team.events import Event, RunStarted
from personae.team.result import RunResult
from personae.team.run_inputs import prepare_workspace
from personae.team.session import RunOptions, run_turn
from personae.tokens.registry import counter_for_model

__all__ = ["PROMPT_MAX_BYTES", "ReplayRequest", "ReplayResult", "check_replay", "replay_run"]

PROMPT_MAX_BYTES = 256 * 1024
"""Largest persona prompt file a replay reads."""


@dataclass(frozen=True, kw_only=True)
class ReplayRequest:
    """What to replay and how."""

    run_id: str
    """The run to replay (a unique id prefix works)."""
    model: str | None = None
    """Model for the live calls (``provider:name``; ``None``: the original run's)."""
    persona_prompt: Path | None = None
    """A file whose text replaces the run's persona prompt for the replay (``None``: keep it)."""
    from_call: int = 1
    """First call asked of a model; earlier calls are answered from the record."""


@dataclass(frozen=True, kw_only=True)
class ReplayResult:
    """A finished replay: the new run's result and how it replayed the original."""

    result: RunResult[Any]
    """The new run's result (the one shape of every run's result)."""
    link: ReplayLink
    """How it replayed the original."""

    @property
    def run_id(self) -> str:
        """The new run."""
        return self.result.run_id

    @property
    def status(self) -> RunStatus:
        """The new run's status."""
        return self.result.status

    @property
    def final_text(self) -> str:
        """The new run's answer."""
        return self.result.answer


@dataclass(frozen=True, kw_only=True)
class _Plan:
    """A checked replay: everything read from the store and the files, nothing written."""

    project: Project
    original: RunRecord
    calls: list[ModelCallRecord]
    inputs: RunInputs | None
    request: ReplayRequest
    spec: ModelSpec
    prompt: str | None
    prompt_sha: str | None


def _fail(message: str, **where: Any) -> UsageError:
    return UsageError(message, **where)


def check_replay(root: Path, request: ReplayRequest) -> _Plan:
    """Check a replay of a run of the project at ``root``; raises ``UsageError`` naming
    what is wrong (nothing is stored)."""
    project = Project.open(root)
    if not store_present(project.state_db):
        raise _fail("no runs stored here yet (run 'personae run TASK' first)",
                    file=project.state_db)  # fmt: skip
    with Store(project.state_db) as store:
        runs = RunStore(store)
        runs.reconcile()
        original = runs.get(request.run_id)
        calls = runs.model_calls(original.id)
        inputs = ReplayStore(store).inputs(original.id)
    if original.status == RunStatus.RUNNING:
        raise _fail(f"run {original.id} is still running: replay it once it has ended")
    last = len(calls) + 1
    if not 1 <= request.from_call <= last:
        raise _fail(f"--from {request.from_call}: run {original.id} has {len(calls)} model "
                    f"call(s); give a call number from 1 to {last}", field="--from")  # fmt: skip
    for call in calls[: request.from_call - 1]:
        if call.answer is None:
            raise _fail(f"call {call.seq} of run {original.id} has no stored answer (stored "
                        f"before answers were kept): replay with --from {call.seq} or lower",
                        field="--from")  # fmt: skip
    spec = parse_model_spec(request.model or original.model, source="--model" if request.model
                            else f"model of run {original.id}")  # fmt: skip
    prompt, sha = None, None
    if request.persona_prompt is not None:
        persona = inputs.persona if inputs is not None else original.persona
        if not persona:
            raise _fail(f"run {original.id} used no persona: --persona-prompt has nothing to "
                        "replace", field="--persona-prompt")  # fmt: skip
        prompt = _read_prompt(request.persona_prompt)
        sha = hashlib.sha256(prompt.encode()).hexdigest()
    resolver = ModelResolver(default=str(spec), base_url=project.config.base_url)
    resolver.check()
    return _Plan(project=project, original=original, calls=calls, inputs=inputs,
                 request=request, spec=spec, prompt=prompt, prompt_sha=sha)  # fmt: skip


def _read_prompt(path: Path) -> str:
    try:
        data = read_regular(path, max_bytes=PROMPT_MAX_BYTES)
    except (OSError, ValueError) as exc:
        raise _fail(f"cannot read the persona prompt: {exc}", file=path) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _fail("the persona prompt is not UTF-8 text", file=path) from None
    if not text.strip():
        raise _fail("the persona prompt is empty", file=path)
    return text


class _Record:
    """The recorded answers, handed out in call order across every model of the replay."""

    def __init__(self, calls: Sequence[ModelCallRecord]) -> None:
        self.calls = list(calls)
        self.served = 0

    def next(self) -> ModelCallRecord | None:
        if self.served >= len(self.calls):
            return None
        self.served += 1
        return self.calls[self.served - 1]


def _response(call: ModelCallRecord) -> ModelResponse:
    """The stored answer of ``call`` as a model response (with the stored token figures)."""
    assert call.answer is not None  # checked by check_replay
    parts: list[ModelResponsePart] = []
    if call.answer.text:
        parts.append(TextPart(content=call.answer.text))
    for i, tool in enumerate(call.answer.tool_calls):
        parts.append(ToolCallPart(tool_name=tool.name, args=tool.args,
                                  tool_call_id=f"recorded-{call.seq}-{i}"))  # fmt: skip
    usage = RequestUsage(input_tokens=int(call.usage.get("input_tokens") or 0),
                         output_tokens=int(call.usage.get("output_tokens") or 0))  # fmt: skip
    reason: Any = call.answer.finish_reason
    return ModelResponse(parts=parts, usage=usage, model_name=call.model, finish_reason=reason)


class _RecordedFirst(WrapperModel):
    """A model that answers from the record while recorded answers are left, then asks the
    model it wraps. It never streams (a recorded answer arrives whole)."""

    _answers_requests_itself: ClassVar[bool] = False

    def __init__(self, wrapped: Model, record: _Record) -> None:
        super().__init__(wrapped)
        self.record = record
        # The runtime streams a model only when it can (a FunctionModel without a stream
        # function cannot): this one answers whole, recorded or live.
        self.stream_function = None

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        recorded = self.record.next()
        if recorded is not None:
            return _response(recorded)
        return await self.wrapped.request(messages, model_settings, model_request_parameters)


@dataclass(kw_only=True)
class _ReplayResolver(ModelResolver):
    """Resolves like :class:`ModelResolver`; every model answers from the record first.
    With ``override`` every persona uses the default model (the replay's ``--model``)."""

    record: _Record = field(default_factory=lambda: _Record(()))
    override: bool = False
    _wrapped: dict[int, _RecordedFirst] = field(default_factory=dict)

    def spec_for(self, persona_model: str | None = None) -> ModelSpec:
        return super().spec_for(None if self.override else persona_model)

    def model(self, persona_model: str | None = None) -> Any:
        live = super().model(persona_model)
        wrapped = self._wrapped.get(id(live))
        if wrapped is None:
            wrapped = self._wrapped[id(live)] = _RecordedFirst(live, self.record)
        return wrapped


def _window(plan: _Plan) -> int | None:
    """The original run's window (the replay fits contexts the same way)."""
    if plan.inputs is not None and plan.inputs.model_window is not None:
        return plan.inputs.model_window
    for call in plan.calls:
        window = call.budget.get("window")
        if isinstance(window, int) and window > 0:
            return window
    return None


def _replay_session(store: Store, plan: _Plan, label: str) -> tuple[str, list[str]]:
    """A fresh session holding the conversation as the original run saw it."""
    conversations = ConversationStore(store, counter_for_model(label))
    session = f"replay-{uuid.uuid4().hex[:8]}"
    persona = plan.inputs.persona if plan.inputs else plan.original.persona
    conversations.create_session(session_id=session, persona=persona,
                                 title=f"replay of {plan.original.id}")  # fmt: skip
    inputs = plan.inputs
    if inputs is None or not inputs.session_id or inputs.history_seq <= 0:
        note = (
            []
            if inputs is not None
            else ["the conversation's position was not recorded: the replay started a fresh one"]
        )
        return session, note
    earlier = conversations.between(inputs.session_id, upto_seq=inputs.history_seq)
    if earlier:
        conversations.append_many(session, earlier)  # the store renumbers and recounts them
    return session, []


def _options(plan: _Plan, *, workspace: Path, session: str) -> RunOptions:
    inputs = plan.inputs or RunInputs(persona=plan.original.persona)
    cast = run_cast(plan.project.root)
    if plan.prompt is not None and inputs.persona in cast.personas:
        persona = cast.personas[inputs.persona]
        cast.personas[inputs.persona] = persona.model_copy(update={"system_prompt": plan.prompt})
    extra: dict[str, Any] = {}
    if inputs.budget_share is not None:
        extra["budget_share"] = inputs.budget_share
    if inputs.max_retries is not None:
        extra["max_retries"] = inputs.max_retries
    return RunOptions(
        root=plan.project.root, workspace=workspace, persona=inputs.persona,
        model=str(plan.spec), session=session, request_cap=inputs.request_cap,
        handover_text=inputs.handover_text, include_git_log=inputs.include_git_log,
        profile=inputs.profile, cast=cast, model_window=_window(plan), **extra,
    )  # fmt: skip


def _diverged(original: Sequence[ModelCallRecord], replayed: Sequence[ModelCallRecord],
              served: int) -> int | None:  # fmt: skip
    """The first recorded call whose role or persona differs from the original's."""
    for old, new in zip(original[:served], replayed[:served], strict=False):
        if (old.role, old.persona, old.subtask) != (new.role, new.persona, new.subtask):
            return new.seq
    return None


async def replay_run(
    root: Path,
    request: ReplayRequest,
    *,
    listeners: Sequence[Callable[[Event], None]] = (),
) -> ReplayResult:
    """Replay a run of the project at ``root`` as a new run linked to it (see the module)."""
    plan = check_replay(root, request)
    record = _Record(plan.calls[: request.from_call - 1])
    resolver = _ReplayResolver(default=str(plan.spec), base_url=plan.project.config.base_url,
                               record=record, override=request.model is not None)  # fmt: skip
    workspace = Path(tempfile.mkdtemp(prefix="personae-replay-"))
    link = ReplayLink(of=plan.original.id, from_call=request.from_call, model=request.model,
                      persona_prompt=str(request.persona_prompt) if request.persona_prompt
                      else None, persona_prompt_sha256=plan.prompt_sha)  # fmt: skip
    try:
        drift = prepare_workspace(plan.project.root, plan.inputs, workspace / "project")
        with Store(plan.project.state_db) as store:
            session, notes = _replay_session(store, plan, resolver.label())
            link = link.model_copy(update={"project_drift": [*drift, *notes]})
            replays = ReplayStore(store)

            def linker(event: Event) -> None:
                if isinstance(event, RunStarted):
                    replays.link(event.run_id, link)

            options = _options(plan, workspace=workspace / "project", session=session)
            try:
                outcome: RunResult[Any] = await run_turn(
                    plan.original.task, options, listeners=[linker, *listeners],
                    resolver=resolver,
                )  # fmt: skip
            finally:
                resolver.close()
            replayed = RunStore(store).model_calls(outcome.run_id)
            served = record.served
            link = link.model_copy(update={
                "recorded_calls": served,
                "diverged_at": _diverged(plan.calls, replayed, served),
            })  # fmt: skip
            replays.link(outcome.run_id, link)
            replays.mark_recorded(outcome.run_id, [
                RecordedCall(seq=new.seq, original_seq=old.seq, model=old.model)
                for old, new in zip(plan.calls[:served], replayed[:served], strict=False)
            ])  # fmt: skip
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    return ReplayResult(result=outcome, link=link)
