"""What every role call of one run shares: models, events, storage, tree-wide usage.

Each role call goes through :meth:`Runtime.call`: a pydantic-ai ``Agent`` run
with a capability that (before every model request) enforces the run-wide
usage cap across the whole tree of agents and (after it) adds the request's
usage to the shared total and stores the model call with the assembled
context and budget report that produced it, and the model's answer (redacted
and capped by :meth:`~personae.store.answers.ModelAnswer.build`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic_ai import Agent, capture_run_messages
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ModelHTTPError, UsageLimitExceeded
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    ToolCallPart,
)
from pydantic_ai.models import Model, ModelRequestContext, ModelRequestParameters
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.usage import UsageLimits

from personae.context.report import BudgetReport, SubagentBrief
from personae.lineage import Budget, Spent
from personae.models.resolve import ModelResolver
from personae.pricing import PriceTable
from personae.store.answers import ModelAnswer
from personae.store.runs import CallRole, EventRow, ModelCallRow, RunStore
from personae.team._progress import CallStream, counted_usage
from personae.team._request_tokens import count_request
from personae.team.bounds import (
    CallBounds,
    CallTimeoutError,
    ContextOverflowError,
    server_error,
)
from personae.team.events import TRANSIENT, CallProgress, Event, EventBus, RunWarning
from personae.team.hooks import HookGate, ModelCall, ModelReply, new_call_id
from personae.tokens.registry import counter_for_model, model_info

__all__ = ["CallInfo", "CallOptions", "Runtime", "SubagentBrief", "TreeUsage", "call_row"]


@dataclass(kw_only=True)
class TreeUsage:
    """Usage shared by every agent of a run (parents and sub-agents) and the runs it started
    in other processes, optionally capped."""

    requests: int = 0
    """Model requests made."""
    input_tokens: int = 0
    """Input tokens reported by the model."""
    output_tokens: int = 0
    """Output tokens reported by the model."""
    tool_calls: int = 0
    """Tool calls made."""
    request_cap: int | None = None
    """Most requests the whole tree may make (``None``: no cap)."""
    token_cap: int | None = None
    """Most total tokens the whole tree may use (``None``: no cap)."""
    tool_call_cap: int | None = None
    """Most tool calls the whole tree may make (``None``: no cap)."""
    halted: str | None = None
    """Why the run was stopped before a count reached its cap (its tool-call cap refused a
    call, a hook vetoed a call); ``None``: not stopped."""
    cost_cap: float | None = None
    """Most cost the whole tree may spend, by :attr:`prices` (``None``: no cap)."""
    prices: PriceTable = field(default_factory=PriceTable)
    """What each model's tokens cost."""
    cost: float = 0.0
    """What this run's priced calls cost."""
    unpriced: dict[str, None] = field(default_factory=dict)
    """Models this run called that have no price."""
    outside: Callable[[], Spent] | None = None
    """Usage of the runs this run started in other processes (handover children, chain
    steps), read from the store when a cap is checked (``None``: none counted)."""

    @property
    def caps(self) -> Budget:
        """The caps on model calls, tokens and cost of the tree below this run."""
        return Budget(tokens=self.token_cap, cost=self.cost_cap, calls=self.request_cap)

    def spent(self) -> Spent:
        """What the tree below this run used: this run and (with caps) its child runs."""
        own = Spent(self.requests, self.input_tokens + self.output_tokens, round(self.cost, 9),
                    tuple(self.unpriced))  # fmt: skip
        if self.outside is None or self.caps.empty:
            return own
        return own + self.outside()

    def left(self) -> Budget:
        """What is left of the caps (what a child run started now gets)."""
        spent = self.spent()
        return self.caps.left_after(tokens=spent.tokens, cost=spent.cost, calls=spent.calls)

    def reason(self) -> str | None:
        """Why no further request may start (the run was halted, a cap reached), or ``None``."""
        if self.halted is not None:
            return self.halted
        if self.caps.empty:
            return None
        spent = self.spent()
        if self.request_cap is not None and spent.calls >= self.request_cap:
            return f"run request cap of {self.request_cap} reached (shared by all agents)"
        if self.token_cap is not None and spent.tokens >= self.token_cap:
            return f"run token cap of {self.token_cap} reached ({spent.tokens} tokens used)"
        if self.cost_cap is not None and spent.cost >= self.cost_cap:
            return f"run cost cap of {self.cost_cap:g} reached ({spent.cost:.6g} spent)"
        return None

    @property
    def exhausted(self) -> bool:
        """A cap has been reached (or the run was halted): no further model request starts."""
        return self.reason() is not None

    def check(self) -> None:
        """Raise ``UsageLimitExceeded`` when a cap is reached (or the run was halted)."""
        why = self.reason()
        if why is not None:
            raise UsageLimitExceeded(why)

    def halt(self, reason: str) -> UsageLimitExceeded:
        """Stop the run for ``reason``: no further model request or tool call starts.
        Returns the exception to raise where it stopped."""
        if self.halted is None:
            self.halted = reason
        return UsageLimitExceeded(reason)

    def start_tool_call(self) -> None:
        """Count a tool call about to run; past the tool-call cap the run is halted."""
        self.check()
        if self.tool_call_cap is not None and self.tool_calls >= self.tool_call_cap:
            raise self.halt(f"run tool-call cap of {self.tool_call_cap} reached")
        self.tool_calls += 1

    def count(
        self, requests: int, input_tokens: int, output_tokens: int, model: str | None = None
    ) -> None:
        """Add the usage of model requests (of ``model``, priced by :attr:`prices`)."""
        self.requests += requests
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        if model is not None:
            self.price(model, input_tokens, output_tokens)

    def price(self, model: str, input_tokens: int, output_tokens: int) -> None:
        """Add the cost of tokens of ``model`` (counted already) by :attr:`prices`."""
        cost = self.prices.cost(model, input_tokens, output_tokens)
        if cost is None:
            self.unpriced[model] = None
        else:
            self.cost += cost

    def as_dict(self) -> dict[str, int]:
        """JSON-safe totals."""
        return {
            "requests": self.requests,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "tool_calls": self.tool_calls,
        }


@dataclass(frozen=True, kw_only=True)
class CallInfo:
    """Who makes a model call and with which assembled context."""

    role: CallRole
    """manager, worker, validator or subagent (the summarizer: ``summarizer``)."""
    persona: str | None
    """Persona the call runs as."""
    subtask: int | None
    """Subtask number."""
    context_text: str
    """The assembled context (instructions + prompt) sent."""
    budget: BudgetReport | SubagentBrief
    """Budget report of the assembled context (a sub-agent's call: its brief)."""


@dataclass(frozen=True, kw_only=True)
class CallOptions:
    """How one agent call runs (everything but who calls and what is asked)."""

    output_type: Any = str
    """The output type (``str`` or a pydantic model such as ``Plan``)."""
    persona_model: str | None = None
    """The persona's own model spec (``None``: the run's model)."""
    toolsets: Sequence[AbstractToolset[Any]] = ()
    """Toolsets the agent may call."""
    max_steps: int | None = None
    """Caps this call's own requests (a fresh budget per call)."""
    timeout: float | None = None
    """Seconds for the whole call (``None``: the role's timeout; never past the run's
    deadline)."""
    max_tokens: int | None = None
    """Cap on each answer's tokens, below the model's output cap (``None``: that cap)."""
    extra_body: dict[str, Any] | None = None
    """Request fields the provider's SDK does not know (``response_format`` for a local
    server)."""
    output_retries: int = 2
    """Retries when the output does not validate."""
    on_text: Callable[[str], object] | None = None
    """Stream the model's responses and get each piece of their text as it arrives
    (when the model can stream; else nothing is streamed)."""


@dataclass
class _Recorder(AbstractCapability[Any]):
    runtime: Runtime
    info: CallInfo
    model_label: str
    local_requests: int = 0
    current: ModelCall | None = None
    """The request in flight, as the hooks saw it."""

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        self.runtime.usage.check()
        self.runtime.bounds.check()
        if self.runtime.hooks:
            info = self.info
            self.current = ModelCall(
                id=new_call_id(), run_id=self.runtime.run_id, role=info.role,
                persona=info.persona, subtask=info.subtask, model=self.model_label,
                step=self.local_requests + 1, messages=tuple(request_context.messages),
            )  # fmt: skip
            if await self.runtime.hooks.before_model(self.current):
                raise self._halt()
        return request_context

    def _halt(self) -> Exception:
        return self.runtime.usage.halt(f"the {self.info.role}'s model call was vetoed by a hook")

    async def before_tool_execute(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition,
        args: dict[str, Any],
    ) -> dict[str, Any]:  # fmt: skip
        self.runtime.usage.start_tool_call()
        return args

    async def after_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        response: ModelResponse,
    ) -> ModelResponse:
        sent = (request_context.messages, request_context.model_request_parameters)
        counted = counted_usage(response, sent, counter_for_model(self.model_label))
        if counted is not None:  # a stream without usage (llama-cpp-python): our own count
            response.usage = counted
        usage = response.usage
        self.runtime.usage.count(1, usage.input_tokens, usage.output_tokens, self.model_label)
        self.local_requests += 1
        if self.runtime.runs is not None:
            row = call_row(self.info, self.model_label, response, self.local_requests, sent)
            if counted is not None:
                row.usage["reported"] = False  # the server reported none: ours, not its
            else:
                self.runtime.observe_input(row)
            self.runtime.pending_calls.append(row)
        if self.runtime.hooks and self.current is not None:
            reply = ModelReply(
                text=response.text or "",
                tool_calls=[(call.tool_name, call.args) for call in response.tool_calls],
                input_tokens=response.usage.input_tokens,
                output_tokens=response.usage.output_tokens,
                finish_reason=response.finish_reason,
            )
            if await self.runtime.hooks.after_model(self.current, reply):
                raise self._halt()
        return response


def call_row(
    info: CallInfo,
    model_label: str,
    response: ModelResponse,
    step: int,
    sent: tuple[Sequence[ModelMessage], ModelRequestParameters | None],
) -> ModelCallRow:
    """One model call as stored: who made it with which context, the usage the provider
    reported beside our own count of the whole request ``sent`` (its messages and
    parameters), and the answer (redacted and capped)."""
    messages, parameters = sent
    counter = counter_for_model(model_label)
    return ModelCallRow(
        role=info.role,
        persona=info.persona,
        subtask=info.subtask,
        model=model_label,
        context_text=info.context_text,
        budget=info.budget.model_dump(mode="json"),
        usage={
            "input_tokens": response.usage.input_tokens,
            "output_tokens": response.usage.output_tokens,
            "step": step,
            "counted_input_tokens": count_request(messages, parameters, counter),
            "counter": counter.name,
            "counter_exact": model_info(model_label).exact,
        },
        at=datetime.now(UTC).isoformat(timespec="milliseconds"),
        answer=ModelAnswer.build(
            text=response.text,
            tool_calls=[(call.tool_name, call.args) for call in response.tool_calls],
            finish_reason=response.finish_reason,
        ),
    )


def _streams(model: Any) -> bool:
    """Whether ``model`` can stream (a ``FunctionModel`` only with a ``stream_function``)."""
    implemented = type(model).request_stream is not Model.request_stream
    return implemented and getattr(model, "stream_function", True) is not None


@dataclass(kw_only=True)
class Runtime:
    """Shared state of one run."""

    models: ModelResolver
    """Resolves each persona's model."""
    bus: EventBus
    """Event fan-out."""
    runs: RunStore | None = None
    """Where events and model calls are stored (``None``: not stored)."""
    pending: list[EventRow] = field(default_factory=list)
    """Events not written yet (written after each role call, or by :meth:`flush`)."""
    pending_calls: list[ModelCallRow] = field(default_factory=list)
    """Model calls not written yet."""
    input_counts: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per model: ``(provider's input tokens, ours)`` summed over the calls where the
    provider reported its figure (what the run's calibration learns from)."""
    usage: TreeUsage = field(default_factory=TreeUsage)
    """Usage shared by the whole tree of agents."""
    bounds: CallBounds = field(default_factory=CallBounds)
    """Per-role call timeouts and the run's deadline."""
    hooks: HookGate = field(default_factory=HookGate)
    """The caller's hooks around model and tool calls (they may veto a call)."""
    _agents: dict[Any, Agent[None, Any]] = field(default_factory=dict, repr=False)
    _cuts_seen: set[tuple[Any, ...]] = field(default_factory=set, repr=False)

    def warn_context_cut(self, info: CallInfo) -> None:
        """Emit a ``context_cut`` warning when the call's context was cut to fit its budget
        (once per role, snapshot and set of cut sections)."""
        report = info.budget
        if not isinstance(report, BudgetReport):  # a sub-agent's call: nothing was fitted
            return
        cut = [
            s
            for s in report.sections
            if s.rule.startswith("budget:") or s.rule in ("removed", "shrunk latest turn")
        ]
        if not cut:
            return
        key = (info.role, report.snapshot_id, tuple(s.tag for s in cut))
        if key in self._cuts_seen:
            return
        self._cuts_seen.add(key)
        parts = ", ".join(
            f"{s.tag} {s.rule.removeprefix('budget: ')} ({s.kept} of {s.requested} tokens)"
            for s in cut
        )
        self.emit(
            RunWarning(
                message=f"context cut to fit the {report.budget}-token budget of the "
                f"{info.role}: " + parts,
                subtask=info.subtask,
                action="context_cut",
                details={
                    "role": info.role,
                    "budget": report.budget,
                    "total": report.total,
                    "sections": [
                        s.model_dump(include={"tag", "rule", "kept", "requested"}) for s in cut
                    ],
                },
            )
        )

    def store_event(self, event: Event) -> None:
        """Bus listener: queue an event for storage (written in batches).

        ``answer_delta`` events are not stored: the ``final`` event holds the whole answer;
        nor are ``call`` events (the stored model calls hold what they say).
        """
        if isinstance(event, TRANSIENT):
            return
        data = event.to_json_dict()["data"]
        self.pending.append(
            EventRow(event.seq, event.kind.value, event.at, event.message, event.subtask, data)
        )

    def observe_input(self, row: ModelCallRow) -> None:
        """Add a call's reported and counted input tokens to :attr:`input_counts`."""
        reported, ours = row.usage.get("input_tokens"), row.usage.get("counted_input_tokens")
        if isinstance(reported, int) and isinstance(ours, int) and reported > 0 and ours > 0:
            was = self.input_counts.get(row.model, (0, 0))
            self.input_counts[row.model] = (was[0] + reported, was[1] + ours)

    def flush(self) -> None:
        """Write queued events and model calls now (one transaction)."""
        if self.runs is not None and (self.pending or self.pending_calls):
            events, self.pending = self.pending, []
            calls, self.pending_calls = self.pending_calls, []
            self.runs.write_batch(self.run_id, events=events, calls=calls)

    @property
    def stopped(self) -> bool:
        """No further model request may start: a usage cap or the run's deadline is reached."""
        left = self.bounds.left()
        return self.usage.exhausted or (left is not None and left <= 0)

    @property
    def run_id(self) -> str:
        """The run id (the bus's)."""
        return self.bus.run_id

    def emit(self, event: Event) -> Event:
        """Emit an event (the store listens on the bus); returns it numbered."""
        return self.bus.emit(event)

    async def call(
        self,
        info: CallInfo,
        *,
        instructions: str,
        prompt: str,
        options: CallOptions | None = None,
        messages_out: list[ModelMessage] | None = None,
    ) -> tuple[Any, int]:
        """Run one agent call; returns (output, requests it made).

        ``options``: output type, model, toolsets, step cap, timeout, streaming
        (see :class:`CallOptions`). ``messages_out`` receives the run's messages,
        also when it raises.
        """
        opts = options or CallOptions()
        self.warn_context_cut(info)
        model = self.models.model(opts.persona_model)
        label = self.models.label(opts.persona_model)
        recorder = _Recorder(runtime=self, info=info, model_label=label)
        key = (id(model), opts.output_type, opts.output_retries)
        agent = self._agents.get(key)
        if agent is None:  # one agent per model and output type; the rest is per run
            agent = Agent(
                model,
                output_type=opts.output_type,
                retries={"tools": 2, "output": opts.output_retries},
            )
            self._agents[key] = agent
        limits = UsageLimits(request_limit=opts.max_steps)
        facts = self.models.facts(opts.persona_model)
        cap = min(opts.max_tokens or facts.max_output, facts.max_output)
        settings = ModelSettings(max_tokens=cap)
        if opts.extra_body:
            settings["extra_body"] = opts.extra_body
        timeout = self.bounds.timeout_for(info.role, opts.timeout)
        start = time.monotonic()
        begun = CallProgress(
            message=f"{info.role} waiting for {label}", subtask=info.subtask, phase="start",
            role=info.role, model=label, max_tokens=cap, timeout=timeout, seconds=None,
            output_tokens=None,
        )  # fmt: skip
        self.emit(begun)
        stream = CallStream(emit=self.emit, start=begun, counter=counter_for_model(label),
                            on_text=opts.on_text, started=start)  # fmt: skip
        written = self.usage.output_tokens
        with capture_run_messages() as messages:
            try:
                result = await agent.run(
                    prompt,
                    instructions=instructions,
                    toolsets=list(opts.toolsets),
                    capabilities=[recorder],
                    usage_limits=limits,
                    model_settings=settings,
                    timeout=timeout,
                    event_stream_handler=stream.handle if _streams(model) else None,
                )
            except ModelHTTPError as exc:
                error = server_error(exc, info.role, facts)
                if isinstance(error, ContextOverflowError):  # the server said its window
                    self.models.learned_window(opts.persona_model, error.data["window"])
                raise error from None
            except TimeoutError as exc:
                self.bounds.check()  # the run's deadline, not this call's timeout
                raise CallTimeoutError(
                    f"the {info.role}'s call to {label} ({facts.where}) took longer than "
                    f"{timeout:g} s"
                ) from exc
            finally:
                if messages_out is not None:
                    messages_out.extend(messages)
                self.flush()
                self.emit(CallProgress(
                    message=f"{info.role} call to {label} ended", subtask=info.subtask,
                    phase="end", role=info.role, model=label, max_tokens=cap, timeout=timeout,
                    seconds=round(time.monotonic() - start, 3),
                    output_tokens=self.usage.output_tokens - written,
                ))  # fmt: skip
        return result.output, recorder.local_requests
