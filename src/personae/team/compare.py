"""Two stored runs side by side, call by call (``personae runs compare``).

:func:`compare_runs` pairs the model calls of two runs by their number and lays out, for
each: role, model, answer, tool calls, the validator's verdict and completion signal,
tokens and time. :func:`render_comparison` prints it in two columns that fit 80
characters (long values wrap, never run past the edge).
"""

from __future__ import annotations

import json
import textwrap
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from personae.models.output import extract_json
from personae.store.replays import ReplayStore
from personae.store.runs import ModelCallRecord, RunRecord, RunStore

__all__ = ["CallPair", "CallSide", "Comparison", "RunSide", "compare_runs", "render_comparison"]

_VERDICT_FIELDS = frozenset({"approved", "requirements_met", "completion_signal"})


class CallSide(BaseModel):
    """One run's model call in a comparison."""

    model_config = ConfigDict(frozen=True)

    seq: int
    role: str
    persona: str | None
    subtask: int | None
    model: str
    answer: str
    """The answer's text ("" when it only called tools)."""
    tool_calls: list[str]
    """``name(arguments)`` of each tool call (structured output included)."""
    verdict: str | None
    """A validator's verdict: ``approved`` or ``rejected`` (``None``: not a verdict)."""
    completion_signal: dict[str, Any] | None
    """A validator's completion signal (confidence, progress, blocker, strategy)."""
    input_tokens: int | None
    output_tokens: int | None
    seconds: float | None
    """Seconds from the previous call's end (or the run's start) to this call's end: the
    call and the tool calls before it."""
    recorded_from: int | None
    """A replay's call answered from the record: the original call's number."""


class RunSide(BaseModel):
    """One run's summary in a comparison."""

    model_config = ConfigDict(frozen=True)

    id: str
    status: str
    persona: str | None
    model: str
    task: str
    final_text: str
    replay_of: str | None
    replay_from: int | None
    """A replay's first live call (``None``: not a replay)."""
    calls: int
    input_tokens: int
    output_tokens: int
    seconds: float | None
    """Start to finish (``None``: not finished)."""


class CallPair(BaseModel):
    """Call number ``index`` of both runs (``None``: that run made fewer calls)."""

    model_config = ConfigDict(frozen=True)

    index: int
    a: CallSide | None
    b: CallSide | None
    same: bool
    """Same role, answer and tool calls on both sides."""


class Comparison(BaseModel):
    """Two runs side by side."""

    model_config = ConfigDict(frozen=True)

    a: RunSide
    b: RunSide
    pairs: list[CallPair]
    first_difference: int | None
    """The first call number whose role, answer or tool calls differ (``None``: none)."""


def _seconds(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    delta = datetime.fromisoformat(end) - datetime.fromisoformat(start)
    return round(delta.total_seconds(), 3)


def _verdict(call: ModelCallRecord) -> tuple[str | None, dict[str, Any] | None]:
    """The validator's verdict and completion signal from its answer (structured output
    as a tool call, or JSON in its text)."""
    if call.role != "validator" or call.answer is None:
        return None, None
    found: dict[str, Any] | None = None
    for tool in call.answer.tool_calls:
        try:
            value = json.loads(tool.args)
        except ValueError:
            continue
        if isinstance(value, dict) and "approved" in value:
            found = value
    if found is None and call.answer.text:
        found = extract_json(call.answer.text, _VERDICT_FIELDS)
    if not found or "approved" not in found:
        return None, None
    signal = found.get("completion_signal")
    return ("approved" if found.get("approved") else "rejected"), (
        signal if isinstance(signal, dict) else None
    )


def _side(call: ModelCallRecord, previous_end: str | None) -> CallSide:
    answer = call.answer
    verdict, signal = _verdict(call)
    recorded = call.usage.get("recorded_from")
    return CallSide(
        seq=call.seq, role=call.role, persona=call.persona, subtask=call.subtask,
        model=call.model, answer=answer.text if answer else "",
        tool_calls=[f"{t.name}({t.args})" for t in answer.tool_calls] if answer else [],
        verdict=verdict, completion_signal=signal,
        input_tokens=call.usage.get("input_tokens"), output_tokens=call.usage.get("output_tokens"),
        seconds=_seconds(previous_end, call.at),
        recorded_from=recorded if isinstance(recorded, int) else None,
    )  # fmt: skip


def _run_side(record: RunRecord, calls: list[ModelCallRecord], replays: ReplayStore) -> RunSide:
    link = replays.link_of(record.id)
    return RunSide(
        id=record.id, status=record.status, persona=record.persona, model=record.model,
        task=record.task, final_text=record.final_text or "", replay_of=record.replay_of,
        replay_from=link.from_call if link else None, calls=len(calls),
        input_tokens=sum(int(c.usage.get("input_tokens") or 0) for c in calls),
        output_tokens=sum(int(c.usage.get("output_tokens") or 0) for c in calls),
        seconds=_seconds(record.started_at, record.finished_at),
    )  # fmt: skip


def _sides(record: RunRecord, calls: list[ModelCallRecord]) -> list[CallSide]:
    out: list[CallSide] = []
    previous: str | None = record.started_at
    for call in calls:
        out.append(_side(call, previous))
        previous = call.at
    return out


def _key(side: CallSide) -> tuple[str, str, list[str]]:
    return side.role, side.answer, side.tool_calls


def compare_runs(runs: RunStore, run_a: str, run_b: str) -> Comparison:
    """Runs ``run_a`` and ``run_b`` (unique id prefixes work) side by side, call by call."""
    record_a, record_b = runs.get(run_a), runs.get(run_b)
    calls_a, calls_b = runs.model_calls(record_a.id), runs.model_calls(record_b.id)
    replays = ReplayStore(runs.store)
    sides_a, sides_b = _sides(record_a, calls_a), _sides(record_b, calls_b)
    pairs: list[CallPair] = []
    first: int | None = None
    for i in range(max(len(sides_a), len(sides_b))):
        a = sides_a[i] if i < len(sides_a) else None
        b = sides_b[i] if i < len(sides_b) else None
        same = a is not None and b is not None and _key(a) == _key(b)
        if not same and first is None:
            first = i + 1
        pairs.append(CallPair(index=i + 1, a=a, b=b, same=same))
    return Comparison(
        a=_run_side(record_a, calls_a, replays), b=_run_side(record_b, calls_b, replays),
        pairs=pairs, first_difference=first,
    )  # fmt: skip


_LABEL = 8
_ANSWER_LINES = 4


def _cell(value: str, width: int, lines: int | None = None) -> list[str]:
    wrapped: list[str] = []
    for paragraph in value.splitlines() or [""]:
        wrapped.extend(textwrap.wrap(paragraph, width, break_long_words=True,
                                     break_on_hyphens=False) or [""])  # fmt: skip
    if lines is not None and len(wrapped) > lines:
        wrapped = [*wrapped[: lines - 1], (wrapped[lines - 1][: width - 1] + "…")]
    return wrapped or [""]


def _row(label: str, a: str, b: str, column: int, lines: int | None = None) -> list[str]:
    left, right = _cell(a, column, lines), _cell(b, column, lines)
    out = []
    for i in range(max(len(left), len(right))):
        name = label if i == 0 else ""
        l_text = left[i] if i < len(left) else ""
        r_text = right[i] if i < len(right) else ""
        out.append(f"{name:<{_LABEL}}{l_text:<{column}}  {r_text}".rstrip())
    return out


def _tokens(side: CallSide) -> str:
    return f"in {side.input_tokens if side.input_tokens is not None else '?'}, " \
           f"out {side.output_tokens if side.output_tokens is not None else '?'}"  # fmt: skip


def _fields(side: CallSide | None) -> dict[str, str]:
    if side is None:
        return {"role": "(no such call)"}
    role = side.role + (f" ({side.persona})" if side.persona else "")
    if side.subtask:
        role += f", subtask {side.subtask}"
    signal = side.completion_signal or {}
    time = f"{side.seconds:g} s" if side.seconds is not None else "-"
    if side.recorded_from is not None:
        time += f", from the record (call {side.recorded_from})"
    return {
        "role": role,
        "model": side.model,
        "answer": side.answer.strip() or "-",
        "tools": "; ".join(side.tool_calls) or "-",
        "verdict": side.verdict or "-",
        "signal": ", ".join(f"{k} {v}" for k, v in signal.items() if v is not None) or "-",
        "tokens": _tokens(side),
        "time": time,
    }


def render_comparison(comparison: Comparison, width: int = 80) -> str:
    """The comparison as text no wider than ``width`` (at least 40) characters."""
    column = max(16, (width - _LABEL - 2) // 2)
    a, b = comparison.a, comparison.b
    lines = [f"A {a.id}", f"B {b.id}"]
    for name, run in (("A", a), ("B", b)):
        if run.replay_of:
            lines.append(f"{name} replays {run.replay_of} (live from call {run.replay_from})")
    lines.append("")
    lines += _row("", "A", "B", column)
    lines += _row("status", a.status, b.status, column)
    lines += _row("model", a.model, b.model, column)
    lines += _row("persona", a.persona or "-", b.persona or "-", column)
    lines += _row("calls", str(a.calls), str(b.calls), column)
    lines += _row("tokens", f"in {a.input_tokens}, out {a.output_tokens}",
                  f"in {b.input_tokens}, out {b.output_tokens}", column)  # fmt: skip
    lines += _row("time", f"{a.seconds:g} s" if a.seconds is not None else "-",
                  f"{b.seconds:g} s" if b.seconds is not None else "-", column)  # fmt: skip
    lines += _row("answer", a.final_text.strip() or "-", b.final_text.strip() or "-", column,
                  _ANSWER_LINES)  # fmt: skip
    for pair in comparison.pairs:
        mark = "same" if pair.same else "differs"
        lines += ["", f"call {pair.index}: {mark}"]
        left, right = _fields(pair.a), _fields(pair.b)
        for key in ("role", "model", "answer", "tools", "verdict", "signal", "tokens", "time"):
            if key in left or key in right:
                lines += _row(key, left.get(key, ""), right.get(key, ""), column, _ANSWER_LINES)
    first = comparison.first_difference
    lines += ["", "first difference: " + (f"call {first}" if first else "none (same calls)")]
    return "\n".join(lines)
