"""A stored run as a tree: subtasks, sub-agents, tool calls and model calls in order.

Pure functions over what :class:`~personae.store.runs.RunStore` returns; no
OpenTelemetry import. Both the web viewer (the timeline) and the trace
exporter (the spans) are built from this one tree.

Events are taken in their stored order; each model call is placed before the
first event that happened after it (a call precedes the events that report
its result). The tree's shape comes from the typed events
(:mod:`personae.team.events`, matched by class); unknown event kinds and extra
fields are kept as plain nodes, so a newer store still reads.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from personae.store.runs import ModelCallRecord, StoredEvent
from personae.team.events import (
    Event,
    SubagentEnded,
    SubagentStarted,
    SubtaskStarted,
    ToolCalled,
    event_from_json,
)

__all__ = ["NodeKind", "RunNode", "build_tree", "call_outcomes", "parse_time", "typed"]


class NodeKind(StrEnum):
    """What a node of the tree is."""

    RUN = "run"
    """The root: the whole run."""
    SUBTASK = "subtask"
    """A subtask (its ``subtask_start`` event), holding what happened for it."""
    SUBAGENT = "subagent"
    """A sub-agent (its start event; ``end_event`` once it ended), holding its steps."""
    MODEL_CALL = "model_call"
    """A model call (``call``)."""
    EVENT = "event"
    """Any other event (``event``; ``typed_event`` is ``None`` for a kind this version
    does not know)."""


@dataclass(kw_only=True)
class RunNode:
    """One node of a run's tree."""

    kind: NodeKind
    """What the node is."""
    at: str
    """When it started (ISO 8601, UTC)."""
    end: str | None = None
    """When it ended (subtasks and sub-agents; ``None``: open or instantaneous)."""
    event: StoredEvent | None = None
    """The event behind the node (for a sub-agent: its start event)."""
    end_event: StoredEvent | None = None
    """A sub-agent's end event."""
    call: ModelCallRecord | None = None
    """The model call behind a ``model_call`` node."""
    subtask: int | None = None
    """Subtask number, where one applies."""
    persona: str | None = None
    """Persona the node ran as, where known."""
    children: list[RunNode] = field(default_factory=list)
    """Nodes inside it, in order."""

    @functools.cached_property
    def typed_event(self) -> Event | None:
        """The event behind the node as its typed class (``None``: none, or an unknown kind)."""
        return typed(self.event) if self.event is not None else None

    @functools.cached_property
    def typed_end(self) -> SubagentEnded | None:
        """A sub-agent's end event as its typed class (read once the tree is built)."""
        end = typed(self.end_event) if self.end_event is not None else None
        return end if isinstance(end, SubagentEnded) else None

    @property
    def label(self) -> str:
        """The node's kind, or for an event node the event's own kind (``plan``, ``final`` ...)."""
        if self.kind is NodeKind.EVENT and self.event is not None:
            return self.event.kind
        return self.kind.value

    def walk(self) -> list[RunNode]:
        """This node and every node below it, depth first, in order."""
        out = [self]
        for child in self.children:
            out.extend(child.walk())
        return out


def parse_time(text: str | None) -> datetime | None:
    """An ISO 8601 time as stored (``None`` or unparsable: ``None``)."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _merged(
    events: Sequence[StoredEvent], calls: Sequence[ModelCallRecord]
) -> list[StoredEvent | ModelCallRecord]:
    """Events in order, each model call before the first event that came after it."""
    pending = sorted(calls, key=lambda c: c.seq)
    out: list[StoredEvent | ModelCallRecord] = []
    for event in sorted(events, key=lambda e: e.seq):
        when = parse_time(event.at)
        while pending and when is not None:
            call_at = parse_time(pending[0].at)
            if call_at is None or call_at <= when:
                out.append(pending.pop(0))
            else:
                break
        out.append(event)
    out.extend(pending)
    return out


class _Builder:
    def __init__(self, root: RunNode) -> None:
        self.root = root
        self.subtasks: dict[int, RunNode] = {}
        self.open_agents: list[RunNode] = []

    def container(self, subtask: int | None) -> RunNode:
        if subtask is not None and subtask in self.subtasks:
            return self.subtasks[subtask]
        return self.root

    def innermost(self, persona: Any = None) -> RunNode | None:
        for node in reversed(self.open_agents):
            if persona is None or node.persona == persona:
                return node
        return None

    def add_call(self, call: ModelCallRecord) -> None:
        node = RunNode(
            kind=NodeKind.MODEL_CALL,
            at=call.at,
            call=call,
            subtask=call.subtask,
            persona=call.persona,
        )
        agent = self.innermost(call.persona) if call.role == "subagent" else None
        (agent or self.container(call.subtask)).children.append(node)
        self._extend(call.subtask, call.at)

    def add_event(self, stored: StoredEvent) -> None:
        event = typed(stored)
        persona = getattr(event, "persona", None)
        persona = persona if isinstance(persona, str) else None
        node = RunNode(
            kind=NodeKind.EVENT, at=stored.at, event=stored, subtask=stored.subtask, persona=persona
        )
        parent: RunNode | None = None
        match event:
            case SubtaskStarted(subtask=int(number)):
                node.kind = NodeKind.SUBTASK
                self.subtasks[number] = node
                self.root.children.append(node)
                return
            case SubagentEnded():
                agent = self.innermost(persona)
                if agent is not None:
                    agent.end, agent.end_event = stored.at, stored
                    self.open_agents.remove(agent)
                    self._extend(stored.subtask, stored.at)
                    return
            case ToolCalled(depth=int(depth)) if depth > 0:
                parent = self.innermost(persona) or self.innermost()
            case SubagentStarted(depth=int(depth)) if depth > 1:
                parent = self.innermost()
            case _:
                pass
        target = parent or self.container(stored.subtask)
        target.children.append(node)
        if isinstance(event, SubagentStarted):
            node.kind = NodeKind.SUBAGENT
            self.open_agents.append(node)
        self._extend(stored.subtask, stored.at)

    def _extend(self, subtask: int | None, at: str) -> None:
        for node in (self.subtasks.get(subtask) if subtask is not None else None, self.root):
            if node is not None:
                node.end = at


def typed(event: StoredEvent) -> Event | None:
    """The stored event as its typed class; ``None`` for a kind this version does not know."""
    try:
        return event_from_json(event.model_dump())
    except ValueError:
        return None


def build_tree(
    events: Sequence[StoredEvent], calls: Sequence[ModelCallRecord], *, started_at: str = ""
) -> RunNode:
    """The run as a tree: the root's children are events, subtasks and model calls in order."""
    root = RunNode(kind=NodeKind.RUN, at=started_at or (events[0].at if events else ""))
    builder = _Builder(root)
    for item in _merged(events, calls):
        if isinstance(item, ModelCallRecord):
            builder.add_call(item)
        else:
            builder.add_event(item)
    return root


def call_outcomes(
    events: Sequence[StoredEvent], calls: Sequence[ModelCallRecord]
) -> dict[int, list[StoredEvent]]:
    """For each model call (by seq), the events recorded after it and before the next call.

    The raw model response is not stored; these events (tool calls it asked
    for, the worker's result, the validation, the plan, the final answer) are
    what the run recorded of the call's answer.
    """
    out: dict[int, list[StoredEvent]] = {c.seq: [] for c in calls}
    top: int | None = None  # the last call of a manager, worker or validator
    sub: int | None = None  # the last call of a sub-agent
    ended: int | None = None  # the last call of a sub-agent that just finished
    for item in _merged(events, calls):
        if isinstance(item, ModelCallRecord):
            if item.role == "subagent":
                sub = item.seq
            else:
                top, sub = item.seq, None
            continue
        event = typed(item)
        nested = isinstance(event, ToolCalled) and isinstance(event.depth, int) and event.depth > 0
        inside = nested or isinstance(event, SubagentEnded)
        owner = sub if inside and sub is not None else top
        if owner is not None:
            out[owner].append(item)
        if ended is not None and isinstance(event, ToolCalled) and event.tool == "agent":
            out[ended].append(item)  # the sub-agent's final message comes back in this result
            ended = None
        if isinstance(event, SubagentEnded):
            sub, ended = None, sub
    return out
