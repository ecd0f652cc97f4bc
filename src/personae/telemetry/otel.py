"""Export a stored run as one OpenTelemetry trace (needs the ``personae[otel]`` extra).

Importing this module imports the OpenTelemetry SDK; :mod:`personae.telemetry`
imports it only when an endpoint is configured, so telemetry costs nothing
when it is off.

Spans (GenAI semantic conventions where one applies, ``personae.*`` for the rest):

- the turn: ``invoke_agent <persona>``, root of the trace, with the run's result
  (:class:`~personae.team.result.RunResult`, read from its ``final`` event: status,
  subtasks and how many were validated, rejected validations, warnings, files
  written, error);
- each subtask: ``subtask <n>`` (last completion signal as attributes, each
  validation as a span event);
- each model call (role call): ``chat <model>`` with ``gen_ai.request.model``,
  ``gen_ai.usage.input_tokens``/``output_tokens``, ``personae.role``, the
  section budgets of its assembled context and, of the answer, only
  ``gen_ai.response.finish_reasons`` and its size (``personae.answer.chars``,
  ``personae.answer.tool_calls``), never its text;
- each tool call: ``execute_tool <tool>``; ``handover_to_persona`` calls are
  ``handover <persona>`` spans;
- each sub-agent: ``invoke_agent <persona>`` with its tool and model calls inside.

Times come from the store. A model call's start is the previous recorded step
(the store keeps when each call returned, not when it was sent).

One trace across processes: a run's root span takes the trace id and span id stored
with the run, and a run started by another run (a handover child, a chain step, a batch
task) goes under its parent run's span (W3C trace context passed down as
``TRACEPARENT``), so the runs of one job, each exported by its own process, make one
trace. :func:`export_tree` exports a run and every run below it at once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, assert_never

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
)

from personae.context.report import BudgetReport, StoredBudget, read_stored_budget
from personae.errors import PersonaeError
from personae.store.db import Store
from personae.store.runs import ModelCallRecord, RunRecord, RunStore, StoredEvent
from personae.store.status import OK_STATUSES
from personae.team.events import RunStarted, SubagentEnded, SubagentStarted, ToolCalled, Validated
from personae.team.result import RunResult, result_of
from personae.team.signals import SubtaskStatus
from personae.telemetry.live import split_model
from personae.telemetry.runtree import (
    NodeKind,
    RunNode,
    build_tree,
    call_outcomes,
    parse_time,
    typed,
)

__all__ = ["TelemetryError", "export_run", "export_tree", "otlp_exporter", "run_to_spans"]

_HANDOVER_TOOL = "handover_to_persona"


def otlp_exporter(endpoint: str) -> SpanExporter:
    """An OTLP/HTTP (protobuf) span exporter for ``endpoint``.

    A base URL (``http://127.0.0.1:4318``) gets ``/v1/traces`` appended, as
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` does; a URL ending in ``/v1/traces`` is used as is.
    """
    # local import: the OTLP/HTTP exporter loads only when exporting to an endpoint
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    url = endpoint.rstrip("/")
    if not url.endswith("/v1/traces"):
        url += "/v1/traces"
    return OTLPSpanExporter(endpoint=url, timeout=10)


def _ns(text: str | None, fallback: int) -> int:
    when = parse_time(text)
    return int(when.timestamp() * 1_000_000_000) if when is not None else fallback


def _signal_attrs(event: Validated) -> dict[str, Any]:
    attrs: dict[str, Any] = {"personae.validation.approved": bool(event.approved)}
    signal = event.completion_signal
    for key in ("confidence", "blocker_type", "suggested_strategy", "progress_made"):
        value = getattr(signal, key)
        if value is not None:
            attrs[f"personae.completion_signal.{key}"] = (
                value if isinstance(value, bool) else str(value)
            )
    return attrs


def _budget_attrs(budget: StoredBudget | None) -> dict[str, Any]:
    """A fitted context's totals and per-section tokens (nothing for a sub-agent's brief or
    a budget not recorded in this form)."""
    if not isinstance(budget, BudgetReport):
        return {}
    attrs: dict[str, Any] = {
        "personae.budget.total": budget.total,
        "personae.budget.budget": budget.budget,
        "personae.budget.overhead": budget.overhead,
    }
    if budget.window is not None:
        attrs["personae.budget.window"] = budget.window
    summary: list[str] = []
    for section in budget.sections:
        tag = section.tag
        attrs[f"personae.section.{tag}.kept"] = section.kept
        attrs[f"personae.section.{tag}.requested"] = section.requested
        attrs[f"personae.section.{tag}.rule"] = section.rule
        summary.append(f"{tag}={section.kept}/{section.requested} {section.rule}")
    if summary:
        attrs["personae.budget.sections"] = summary
    return attrs


@dataclass
class _Emitter:
    tracer: Tracer
    run: RunRecord
    outcomes: dict[int, list[StoredEvent]]
    cursor: int
    """Time (ns) of the last step emitted: where the next call or tool call began."""

    def span(
        self, name: str, parent: Span, start: int, attrs: dict[str, Any], kind: SpanKind
    ) -> Span:
        ctx = trace.set_span_in_context(parent, Context())
        return self.tracer.start_span(
            name, context=ctx, kind=kind, attributes=attrs, start_time=start
        )

    def children(self, node: RunNode, parent: Span) -> None:
        for child in node.children:
            self.node(child, parent)

    def node(self, node: RunNode, parent: Span) -> None:
        match node.kind:
            case NodeKind.MODEL_CALL:
                if node.call is not None:
                    self.model_call(node.call, parent)
            case NodeKind.SUBTASK | NodeKind.SUBAGENT:
                self.group(node, parent)
            case NodeKind.EVENT:
                event = node.typed_event
                if isinstance(event, ToolCalled):
                    self.tool_call(node, event, parent)
                elif node.event is not None:
                    at = _ns(node.at, self.cursor)
                    attrs: dict[str, Any] = {"personae.event.seq": node.event.seq}
                    if isinstance(event, Validated):
                        attrs |= _signal_attrs(event)
                        parent.set_attributes(_signal_attrs(event))
                    parent.add_event(f"personae.{node.label}", attributes=attrs, timestamp=at)
                    self.cursor = max(self.cursor, at)
            case NodeKind.RUN:
                self.children(node, parent)
            case _:
                assert_never(node.kind)

    def group(self, node: RunNode, parent: Span) -> None:
        start = _ns(node.at, self.cursor)
        self.cursor = max(self.cursor, start)
        if node.kind is NodeKind.SUBTASK:
            name = f"subtask {node.subtask}"
            attrs: dict[str, Any] = {"personae.subtask": node.subtask or 0}
            if node.event is not None:
                attrs["personae.subtask.description"] = node.event.message
            kind = SpanKind.INTERNAL
        else:
            name = f"invoke_agent {node.persona}"
            begin = node.typed_event
            attrs = {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": node.persona or "",
            }
            if isinstance(begin, SubagentStarted):  # else its start event did not read
                attrs["personae.subagent.context_mode"] = begin.context_mode.value
                attrs["personae.subagent.depth"] = begin.depth
            kind = SpanKind.INTERNAL
        span = self.span(name, parent, start, attrs, kind)
        self.children(node, span)
        ended = node.typed_end
        if isinstance(ended, SubagentEnded):
            span.set_attribute("personae.subagent.status", ended.status)
            if ended.status != "success":
                span.set_status(Status(StatusCode.ERROR, ended.status))
        end = _ns(node.end, self.cursor)
        self.cursor = max(self.cursor, end)
        span.end(end_time=max(end, start))

    def model_call(self, call: ModelCallRecord, parent: Span) -> None:
        provider, model = split_model(call.model)
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
            "personae.role": call.role,
            "personae.persona": call.persona or "",
            "personae.model_call.seq": call.seq,
        }
        for key in ("input_tokens", "output_tokens"):
            if isinstance(call.usage.get(key), int):
                attrs[f"gen_ai.usage.{key}"] = call.usage[key]
        if call.subtask is not None:
            attrs["personae.subtask"] = call.subtask
        attrs |= _budget_attrs(read_stored_budget(call.budget))
        if call.answer is not None:  # sizes and finish reason only, never the answer's text
            if call.answer.finish_reason:
                attrs["gen_ai.response.finish_reasons"] = [call.answer.finish_reason]
            attrs["personae.answer.chars"] = call.answer.chars
            attrs["personae.answer.tool_calls"] = len(call.answer.tool_calls)
        for stored in self.outcomes.get(call.seq, []) if call.role == "validator" else []:
            event = typed(stored)
            if isinstance(event, Validated):
                attrs |= _signal_attrs(event)
        end = _ns(call.at, self.cursor)
        span = self.span(f"chat {model}", parent, min(self.cursor, end), attrs, SpanKind.CLIENT)
        span.end(end_time=end)
        self.cursor = max(self.cursor, end)

    def tool_call(self, node: RunNode, call: ToolCalled, parent: Span) -> None:
        tool = str(call.tool or "?")
        end = _ns(node.at, self.cursor)
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "personae.persona": node.persona or "",
            "personae.tool.ok": bool(call.ok),
        }
        name = f"execute_tool {tool}"
        raw = call.args
        args: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if tool == _HANDOVER_TOOL:
            target = str(args.get("targetPersona") or args.get("target_persona") or "?")
            name = f"handover {target}"
            attrs["personae.handover.target"] = target
        span = self.span(name, parent, min(self.cursor, end), attrs, SpanKind.INTERNAL)
        if not call.ok:
            span.set_status(Status(StatusCode.ERROR, str(call.result or "")[:200]))
        span.end(end_time=end)
        self.cursor = max(self.cursor, end)


class _StoredIds(IdGenerator):
    """Ids for one run's spans: its stored trace id, and its stored span id for the first
    span (its root); random ids after that."""

    def __init__(self, run: RunRecord) -> None:
        self._random = RandomIdGenerator()
        self._trace = _hex(run.trace_id)
        self._first = _hex(run.span_id)

    def generate_span_id(self) -> int:
        first, self._first = self._first, None
        return first if first else self._random.generate_span_id()

    def generate_trace_id(self) -> int:
        return self._trace or self._random.generate_trace_id()


def _hex(text: str | None) -> int | None:
    try:
        return int(text, 16) or None if text else None
    except ValueError:
        return None


def _parent_context(run: RunRecord) -> Context:
    """Where the run's root span goes: under its parent run's span (same trace), else a
    trace of its own."""
    trace_id, span_id = _hex(run.trace_id), _hex(run.parent_span_id)
    if trace_id is None or span_id is None:
        return Context()
    parent = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(1))
    return trace.set_span_in_context(NonRecordingSpan(parent), Context())


def _result(run: RunRecord, events: Sequence[StoredEvent]) -> RunResult[str] | None:
    """The run's result (``None``: it has none, or a stored event is not readable: the
    spans then carry the row's status and usage only)."""
    try:
        return result_of(run, events)
    except ValueError:
        return None


def _result_attrs(result: RunResult[str]) -> dict[str, Any]:
    """The run span's attributes from the run's result (the same one the Python API
    returned): status, subtasks, files written, warnings, error."""
    attrs: dict[str, Any] = {
        "personae.run.status": result.status.value,
        "personae.run.subtasks": len(result.subtasks),
        "personae.run.subtasks.validated": sum(
            t.status is SubtaskStatus.VALIDATED for t in result.subtasks
        ),
        "personae.run.failure_count": result.failure_count,
        "personae.run.warnings": len(result.warnings),
        "personae.run.files_written": tuple(result.files_written),
    }
    if result.error:
        attrs["personae.run.error"] = result.error
    return attrs


def run_to_spans(
    tracer: Tracer,
    run: RunRecord,
    events: Sequence[StoredEvent],
    calls: Sequence[ModelCallRecord],
) -> None:
    """Emit the spans of one stored run through ``tracer`` (ended, with stored times)."""
    tree = build_tree(events, calls, started_at=run.started_at)
    start = _ns(run.started_at, 0)
    emitter = _Emitter(tracer, run, call_outcomes(events, calls), start)
    provider, model = split_model(run.model)
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": run.persona or "",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
        "personae.run.id": run.id,
        "personae.run.status": run.status.value,
        "personae.task": run.task,
    }
    if run.session_id:
        attrs["gen_ai.conversation.id"] = run.session_id
    if run.parent_run_id:
        attrs["personae.parent_run.id"] = run.parent_run_id
    for key in ("input_tokens", "output_tokens"):
        if isinstance(run.usage.get(key), int):
            attrs[f"gen_ai.usage.{key}"] = run.usage[key]
    result = _result(run, events)
    if result is not None:
        attrs |= _result_attrs(result)
    begin = typed(events[0]) if events else None
    if isinstance(begin, RunStarted) and begin.context_from:
        attrs["personae.handover.from"] = str(begin.context_from)
    root = tracer.start_span(
        f"invoke_agent {run.persona or 'personae'}",
        context=_parent_context(run),
        kind=SpanKind.INTERNAL,
        attributes=attrs,
        start_time=start,
    )
    emitter.children(tree, root)
    if run.status not in OK_STATUSES:
        why = result.error if result is not None and result.error else run.status.value
        root.set_status(Status(StatusCode.ERROR, why))
    end = _ns(run.finished_at, emitter.cursor)
    root.end(end_time=max(end, emitter.cursor))


def export_run(
    db: Path, run_id: str, *, endpoint: str | None = None, exporter: SpanExporter | None = None
) -> int:
    """Export the stored run ``run_id`` of the store at ``db`` as one trace; returns its span count.

    Spans go to ``exporter`` when given (tests pass the SDK's in-memory
    exporter), else to an OTLP/HTTP exporter for ``endpoint``. The spans are
    built first and sent in one export; a failed export is a
    :class:`TelemetryError` (the exporter's own retry warnings are kept quiet).
    A run started by another run joins its parent's trace, under its span.
    """
    return _export(db, run_id, endpoint=endpoint, exporter=exporter, tree=False)


def export_tree(
    db: Path, run_id: str, *, endpoint: str | None = None, exporter: SpanExporter | None = None
) -> int:
    """:func:`export_run` for run ``run_id`` and every run below it (one trace)."""
    return _export(db, run_id, endpoint=endpoint, exporter=exporter, tree=True)


def _export(
    db: Path, run_id: str, *, endpoint: str | None, exporter: SpanExporter | None, tree: bool
) -> int:
    if exporter is None and not endpoint:
        raise ValueError("export_run needs an endpoint or an exporter")
    with Store(db) as store:
        runs = RunStore(store)
        run = runs.get(run_id)
        chosen = [run, *(runs.descendants(run.id) if tree else [])]
        loaded = [(r, runs.events(r.id), runs.model_calls(r.id)) for r in chosen]
    spans: list[ReadableSpan] = []
    for record, events, calls in loaded:  # one provider a run: its own stored ids
        memory = InMemorySpanExporter()  # (a provider's shutdown stops its exporter)
        provider = TracerProvider(
            resource=Resource.create({"service.name": "personae"}), shutdown_on_exit=False,
            id_generator=_StoredIds(record),
        )  # fmt: skip
        provider.add_span_processor(SimpleSpanProcessor(memory))
        run_to_spans(provider.get_tracer("personae"), record, events, calls)
        provider.shutdown()
        spans.extend(memory.get_finished_spans())
    target = exporter if exporter is not None else otlp_exporter(str(endpoint))
    quiet = logging.getLogger("opentelemetry.exporter")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        result = target.export(spans)
    finally:
        quiet.setLevel(level)
        if exporter is None:
            target.shutdown()
    if result is not SpanExportResult.SUCCESS:
        raise TelemetryError(f"trace of run {run.id} not exported to {endpoint or 'the exporter'}")
    return len(spans)


class TelemetryError(PersonaeError):
    """A trace could not be exported (the run itself is stored and unaffected)."""
