"""Event payloads typed end to end: every payload field is required (an event cannot be
made without its data), each reads back from its JSON form into its type (a plan's
``Subtask``, a ``CompletionSignal``, the enums), and a stored event that lacks a field
is refused by name, except the few fields older versions did not write (read as stated
in ``_WRITTEN_LATER``) and the ones left out when ``None``."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from personae.context.modes import ContextMode
from personae.store.status import RunStatus
from personae.team import events as ev
from personae.team.dispatch import StepAction
from personae.team.signals import (
    BlockerType,
    CompletionSignal,
    Confidence,
    InvolvementLevel,
    Strategy,
    Subtask,
    SubtaskResult,
    SubtaskStatus,
)
from personae.tools.records import ToolCallRecord

ENVELOPE = {"run_id": "r", "seq": 3, "at": "2026-11-27T21:00:00.000+00:00", "message": "m"}

SIGNAL = CompletionSignal(
    confidence=Confidence.LOW,
    progress_made=True,
    blocker_type=BlockerType.SCOPE_DRIFT,
    suggested_strategy=Strategy.REPHRASE,
)

SAMPLES: list[ev.Event] = [
    ev.RunStarted(**ENVELOPE, task="t", persona="dev", session=None, context_from=None,
                  pid=7, sandbox="off (test)"),
    ev.PlanMade(**ENVELOPE, subtasks=[Subtask(description="a", requirements=["b"])],
                rationale="why"),
    ev.SubtaskStarted(**ENVELOPE, subtask=1, requirements=["b"], persona="dev"),
    ev.ToolCalled(**ENVELOPE, subtask=1, tool="read_file", args={"path": "x"}, ok=True,
                  result="x", persona="dev", reused=False, depth=None),
    ev.WorkDone(**ENVELOPE, subtask=1, attempt=1, success=True, tools_used=["read_file"],
                failed_tools=[ToolCallRecord(tool="grep", args={"q": "x"}, ok=False,
                                             result="no", persona="dev")],
                loop_detected=False, result="done", skills=["s"],
                skill_commands=[("ls", "see")]),
    ev.Validated(**ENVELOPE, subtask=1, used_llm=True, skills=None, approved=False,
                 requirements_met=False, issues=["i"], next_action="fix",
                 involvement_level=InvolvementLevel.THOROUGH, correction="do x",
                 completion_signal=SIGNAL),
    ev.Corrected(**ENVELOPE, subtask=1, action=StepAction.REPHRASE,
                 blocker=BlockerType.SCOPE_DRIFT, retries_used=1, max_retries=2),
    ev.RunWarning(**ENVELOPE, action="usage_cap", details={"cap": 3}),
    ev.SubagentStarted(**ENVELOPE, persona="helper", context_mode=ContextMode.BRIEF, depth=1,
                       task="t"),
    ev.SubagentEnded(**ENVELOPE, persona="helper", context_mode=ContextMode.BRIEF, status="partial",
                     progress_made=True, usage={"requests": 2}, temp_workspace=None),
    ev.RunFinished(**ENVELOPE, status=RunStatus.PARTIAL, subtasks=[
                       SubtaskResult(number=1, description="d", status=SubtaskStatus.VALIDATED,
                                     result="r", reason="", attempts=1, signal=SIGNAL),
                       SubtaskResult(number=2, description="e", status=SubtaskStatus.SKIPPED,
                                     result="", reason="cap", attempts=0, signal=None)],
                   usage={"requests": 4}, failure_count=1, warnings=["w"],
                   files_written=["a.md"], error=None),
    ev.AnswerStreamed(**ENVELOPE, text="pie"),
    ev.CallProgress(**ENVELOPE, phase="end", role="worker", model="scripted:x", max_tokens=9,
                    timeout=5.0, seconds=0.5, output_tokens=3),
]  # fmt: skip

CLASS_FIXED = {"phase"}
"""A sub-agent event's ``phase`` is its class's (start or end), not data a producer gives."""


def _payload(cls: type[ev.Event]) -> list[dataclasses.Field[Any]]:
    return [f for f in dataclasses.fields(cls) if f.name not in ev._ENVELOPE]


def test_every_event_class_has_a_sample() -> None:
    assert {type(e) for e in SAMPLES} == {*ev._CLASSES.values(), ev.SubagentEnded}


@pytest.mark.parametrize("cls", sorted({type(e) for e in SAMPLES}, key=lambda c: c.__name__))
def test_no_payload_field_has_a_default(cls: type[ev.Event]) -> None:
    defaulted = [
        f.name
        for f in _payload(cls)
        if f.name not in CLASS_FIXED
        and (f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING)
    ]
    assert defaulted == [], f"{cls.__name__} makes up {defaulted} when a producer leaves it out"
    with pytest.raises(TypeError, match="missing"):
        cls(**ENVELOPE)  # type: ignore[call-arg]


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: type(e).__name__)
def test_each_event_reads_back_into_its_types(event: ev.Event) -> None:
    raw = json.loads(json.dumps(event.to_json_dict()))  # as stored or printed by --json
    back = ev.event_from_json(raw)
    assert back == event
    assert back.to_json_dict() == event.to_json_dict()


def test_the_models_and_enums_come_back_typed() -> None:
    by_class = {type(e): ev.event_from_json(e.to_json_dict()) for e in SAMPLES}
    plan = by_class[ev.PlanMade]
    assert isinstance(plan, ev.PlanMade) and isinstance(plan.subtasks[0], Subtask)
    verdict = by_class[ev.Validated]
    assert isinstance(verdict, ev.Validated)
    assert verdict.completion_signal == SIGNAL
    assert verdict.involvement_level is InvolvementLevel.THOROUGH
    fix = by_class[ev.Corrected]
    assert isinstance(fix, ev.Corrected)
    assert (fix.action, fix.blocker) == (StepAction.REPHRASE, BlockerType.SCOPE_DRIFT)
    work = by_class[ev.WorkDone]
    assert isinstance(work, ev.WorkDone) and isinstance(work.failed_tools[0], ToolCallRecord)
    assert work.skill_commands == [("ls", "see")]
    spawn = by_class[ev.SubagentStarted]
    assert isinstance(spawn, ev.SubagentStarted) and spawn.context_mode is ContextMode.BRIEF
    final = by_class[ev.RunFinished]
    assert isinstance(final, ev.RunFinished)
    assert [(t.status, t.signal) for t in final.subtasks] == [
        (SubtaskStatus.VALIDATED, SIGNAL),
        (SubtaskStatus.SKIPPED, None),
    ]
    assert isinstance(final.subtasks[0], SubtaskResult) and final.files_written == ["a.md"]
    assert final.status is RunStatus.PARTIAL
    # the JSON form of a failed call leaves out its dispatch details, as before
    assert set(work.to_json_dict()["data"]["failed_tools"][0]) == set(
        ToolCallRecord(tool="x").brief()
    )


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: type(e).__name__)
def test_a_stored_event_without_a_field_is_refused_by_name(event: ev.Event) -> None:
    cls = type(event)
    if cls is ev.RunWarning:  # an open payload: every key but action is a detail
        return
    tolerated = ev._WRITTEN_LATER.get(cls, {})
    for field in _payload(cls):
        if field.name in CLASS_FIXED:
            continue
        raw = event.to_json_dict()
        raw["data"].pop(field.name, None)
        if field.name in tolerated:
            back = ev.event_from_json(raw)
            assert getattr(back, field.name) == tolerated[field.name]
        elif field.name in cls.omitted_when_none:
            assert getattr(ev.event_from_json(raw), field.name) is None
        else:
            with pytest.raises(
                ValueError, match=f"event 3 \\({cls.kind.value}\\) of run r has no {field.name}$"
            ):
                ev.event_from_json(raw)


def test_a_field_of_the_wrong_shape_is_refused_by_name() -> None:
    raw = SAMPLES[5].to_json_dict()
    raw["data"]["completion_signal"] = {"confidence": "sure", "progress_made": True}
    with pytest.raises(
        ValueError, match=r"event 3 \(validation\) of run r: completion_signal\.confidence"
    ):
        ev.event_from_json(raw)


def test_old_stored_events_read_as_stated_once() -> None:
    """Events stored by earlier versions: a verdict without ``skills`` and ``correction``,
    a worker's result without ``skills`` and ``skill_commands``, a tool call without
    ``reused``."""
    old_verdict = {
        "kind": "validation", "run_id": "r", "seq": 5, "at": "t", "message": "approved",
        "subtask": 1,
        "data": {"used_llm": True, "approved": True, "requirements_met": True, "issues": [],
                 "next_action": "", "involvement_level": "standard",
                 "completion_signal": {"confidence": "high", "progress_made": True}},
    }  # fmt: skip
    verdict = ev.event_from_json(old_verdict)
    assert isinstance(verdict, ev.Validated)
    assert (verdict.skills, verdict.correction) == (None, "")
    old_work = {
        "kind": "work_result", "run_id": "r", "seq": 4, "at": "t", "message": "m", "subtask": 1,
        "data": {"attempt": 1, "success": True, "tools_used": [], "failed_tools": [],
                 "loop_detected": False, "result": "r"},
    }  # fmt: skip
    work = ev.event_from_json(old_work)
    assert isinstance(work, ev.WorkDone) and (work.skills, work.skill_commands) == ([], [])
    old_call = {
        "kind": "tool_call", "run_id": "r", "seq": 3, "at": "t", "message": "m", "subtask": 1,
        "data": {"tool": "read_file", "args": {}, "ok": True, "result": "", "persona": "dev"},
    }  # fmt: skip
    call = ev.event_from_json(old_call)
    assert isinstance(call, ev.ToolCalled) and (call.reused, call.depth) == (None, None)


def test_an_old_final_event_reads_with_its_numbers_kept() -> None:
    """A ``final`` event stored before it carried the subtasks, warnings and files: those
    read as empty, and its ``validated``/``not_validated`` numbers stay in ``extra``."""
    old_final = {
        "kind": "final", "run_id": "r", "seq": 9, "at": "t", "message": "answer",
        "data": {"status": "partial", "validated": [1], "not_validated": {"2": "skipped"},
                 "usage": {"requests": 3}, "failure_count": 0, "error": None},
    }  # fmt: skip
    final = ev.event_from_json(old_final)
    assert isinstance(final, ev.RunFinished) and final.status is RunStatus.PARTIAL
    assert (final.subtasks, final.warnings, final.files_written) == ([], [], [])
    assert final.extra == {"validated": [1], "not_validated": {"2": "skipped"}}


def test_an_unknown_context_mode_is_refused_by_name() -> None:
    raw = {
        "kind": "subagent", "run_id": "r", "seq": 4, "at": "t", "message": "m",
        "data": {"persona": "helper", "phase": "start", "context_mode": "everything",
                 "depth": 1, "task": "t"},
    }  # fmt: skip
    with pytest.raises(ValueError, match=r"event 4 \(subagent\) of run r: context_mode"):
        ev.event_from_json(raw)
