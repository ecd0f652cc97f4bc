"""OpenTelemetry spans while a run runs: each span starts and ends as its step happens.

:class:`LiveSpans` is a :class:`~personae.team.hooks.RunHooks`: it opens the run's
span at its ``start`` event, a span per subtask and per sub-agent, a ``chat
<model>`` span around each model request and an ``execute_tool <tool>`` span
around each tool call, and ends each one when its step ends (the run's span at
its ``final`` event). A span processor therefore sees every step as it ends,
not after the run. The names and attributes are those of the trace built from
a stored run (:mod:`personae.telemetry.otel`, GenAI semantic conventions where
one applies); the answer's text is never put in a span. Needs the
``personae[otel]`` extra.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider

from personae.store.status import OK_STATUSES
from personae.team.events import (
    Event,
    RunFinished,
    RunStarted,
    RunWarning,
    SubagentEnded,
    SubagentStarted,
    SubtaskStarted,
    Validated,
)
from personae.team.hooks import HookAnswer, ModelCall, ModelReply, RunHooks, ToolOutcome, ToolUse

__all__ = ["LiveSpans", "split_model"]


def split_model(label: str) -> tuple[str, str]:
    """``provider:name`` split for the gen_ai attributes (``unknown`` without a provider)."""
    provider, sep, name = label.partition(":")
    return (provider, name) if sep else ("unknown", label)


@dataclass
class _RunSpans:
    """The open spans of one run."""

    root: Span
    subtask: Span | None = None
    agents: list[Span] = field(default_factory=list)
    calls: dict[str, Span] = field(default_factory=dict)

    def parent(self) -> Span:
        """Where a call's span goes: the innermost sub-agent, else the subtask, else the run."""
        return self.agents[-1] if self.agents else (self.subtask or self.root)


class LiveSpans(RunHooks):
    """Spans of a run as it runs, through ``tracer_provider`` (default: the global one).

    Example (the SDK's in-memory exporter)::

        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
        team = Team(root=..., hooks=[LiveSpans(provider)])
    """

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        self.tracer: Tracer = trace.get_tracer("personae", tracer_provider=tracer_provider)
        """The tracer spans are made with."""
        self._runs: dict[str, _RunSpans] = {}

    def _start(self, name: str, parent: Span | None, attrs: dict[str, Any],
               kind: SpanKind = SpanKind.INTERNAL) -> Span:  # fmt: skip
        context = trace.set_span_in_context(parent, Context()) if parent else Context()
        return self.tracer.start_span(name, context=context, kind=kind, attributes=attrs)

    def on_event(self, event: Event) -> None:
        """Open and close the run, subtask and sub-agent spans; mark vetoes and verdicts."""
        if isinstance(event, RunStarted):
            self._run_started(event)
            return
        spans = self._runs.get(event.run_id)
        if spans is None:
            return
        match event:
            case SubtaskStarted():
                if spans.subtask is not None:
                    spans.subtask.end()
                spans.subtask = self._start(f"subtask {event.subtask}", spans.root, {
                    "personae.subtask": event.subtask or 0,
                    "personae.subtask.description": event.message,
                })  # fmt: skip
            case SubagentStarted():
                spans.agents.append(self._start(f"invoke_agent {event.persona}", spans.parent(), {
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": event.persona,
                    "personae.subagent.context_mode": event.context_mode.value,
                }))  # fmt: skip
            case SubagentEnded():
                if spans.agents:
                    span = spans.agents.pop()
                    span.set_attribute("personae.subagent.status", event.status)
                    if event.status != "success":
                        span.set_status(Status(StatusCode.ERROR, event.status))
                    span.end()
            case Validated():
                approved = {"personae.validation.approved": bool(event.approved)}
                (spans.subtask or spans.root).add_event("personae.validation", approved)
            case RunWarning(action="vetoed"):
                vetoed = spans.calls.pop(str(event.details.get("call_id")), None)
                if vetoed is not None:
                    why = f"vetoed: {event.details['reason']}"
                    vetoed.set_status(Status(StatusCode.ERROR, why))
                    vetoed.end()
            case RunFinished():
                self._run_finished(spans, event)
            case _:
                pass

    def _run_started(self, event: RunStarted) -> None:
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": event.persona or "",
            "personae.run.id": event.run_id,
            "personae.task": event.task or "",
        }
        if event.session:
            attrs["gen_ai.conversation.id"] = event.session
        root = self._start(f"invoke_agent {event.persona or 'personae'}", None, attrs)
        self._runs[event.run_id] = _RunSpans(root=root)

    def _run_finished(self, spans: _RunSpans, event: RunFinished) -> None:
        self._runs.pop(event.run_id, None)
        for span in [*spans.calls.values(), *reversed(spans.agents)]:
            span.set_status(Status(StatusCode.ERROR, "the run ended first"))
            span.end()
        if spans.subtask is not None:
            spans.subtask.end()
        spans.root.set_attribute("personae.run.status", event.status.value)
        for key, value in event.usage.items():
            if key in ("input_tokens", "output_tokens"):
                spans.root.set_attribute(f"gen_ai.usage.{key}", int(value))
        if event.status not in OK_STATUSES:
            spans.root.set_status(Status(StatusCode.ERROR, event.status.value))
        spans.root.end()

    def before_model(self, call: ModelCall) -> HookAnswer:
        """Open the request's ``chat <model>`` span."""
        spans = self._runs.get(call.run_id)
        if spans is not None:
            provider, model = split_model(call.model)
            attrs: dict[str, Any] = {
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
                "gen_ai.request.model": model, "personae.role": call.role,
                "personae.persona": call.persona or "", "personae.step": call.step,
            }  # fmt: skip
            if call.subtask is not None:
                attrs["personae.subtask"] = call.subtask
            spans.calls[call.id] = self._start(f"chat {model}", spans.parent(), attrs,
                                               SpanKind.CLIENT)  # fmt: skip
        return None

    def after_model(self, call: ModelCall, reply: ModelReply) -> HookAnswer:
        """End the request's span with its usage, finish reason and answer size."""
        spans = self._runs.get(call.run_id)
        span = spans.calls.pop(call.id, None) if spans is not None else None
        if span is not None:
            span.set_attributes({
                "gen_ai.usage.input_tokens": reply.input_tokens,
                "gen_ai.usage.output_tokens": reply.output_tokens,
                "personae.answer.chars": len(reply.text),
                "personae.answer.tool_calls": len(reply.tool_calls),
            })  # fmt: skip
            if reply.finish_reason:
                span.set_attribute("gen_ai.response.finish_reasons", [reply.finish_reason])
            span.end()
        return None

    def before_tool(self, call: ToolUse) -> HookAnswer:
        """Open the call's ``execute_tool <tool>`` span."""
        spans = self._runs.get(call.run_id)
        if spans is not None:
            spans.calls[call.id] = self._start(f"execute_tool {call.tool}", spans.parent(), {
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.tool,
                "gen_ai.tool.call.id": call.id, "personae.persona": call.persona,
            })  # fmt: skip
        return None

    def after_tool(self, call: ToolUse, outcome: ToolOutcome) -> HookAnswer:
        """End the call's span (an error status when the tool failed)."""
        spans = self._runs.get(call.run_id)
        span = spans.calls.pop(call.id, None) if spans is not None else None
        if span is not None:
            span.set_attribute("personae.tool.ok", outcome.ok)
            if not outcome.ok:
                span.set_status(Status(StatusCode.ERROR, outcome.text[:200]))
            span.end()
        return None
