"""The per-turn shared context of the team and its role views, on the context engine.

One :class:`TurnContext` per turn wraps one :class:`~personae.context.snapshot.Snapshot`
(directive read fresh, conversation summary + recent messages, persona
execution block and validation context). Each role's view is
``assemble_snapshot(snapshot, role, budget, counter)``: shared sections byte-identical
across roles, the execution block for manager/worker only, the validation
context for the validator only. Tool calls and validated work of this turn are
appended as messages (tool calls paired with their results), so later
subtasks see earlier tool results.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from personae.context.assemble import assemble_snapshot
from personae.context.budget import Budget
from personae.context.messages import ChatMessage, ChatToolCall
from personae.context.profiles import ProfileSet, load_profiles
from personae.context.report import BudgetReport
from personae.context.snapshot import Snapshot, SnapshotOptions
from personae.context.spec import Profile, SectionSource
from personae.tokens.base import TokenCounter

__all__ = ["FORK_ROLE", "PRIVATE_SOURCES", "ContextView", "RoleName", "TurnContext"]

FORK_ROLE = "subagent_fork"
"""The derived role a ``fork`` sub-agent's context is assembled for."""

PRIVATE_SOURCES = frozenset({"persona", "validation", "task"})
"""Sources a forked sub-agent never gets: the parent's persona execution block, the
validation context, and the parent's task (the child has its own)."""

RoleName = Literal["manager", "worker", "validator"]

_DEFAULT_BUDGET = Budget.of_window(128_000)


@dataclass(frozen=True, kw_only=True)
class ContextView:
    """A role's assembled context and the budget report of how it was fitted."""

    role: str
    """manager, worker or validator."""
    text: str
    """The rendered context (XML boundary tags)."""
    report: BudgetReport
    """The budget report (``BudgetReport.to_text()`` renders it)."""


@dataclass(kw_only=True)
class TurnContext:
    """Everything the three roles share for one turn."""

    snapshot: Snapshot
    """The turn's snapshot (built once)."""
    counter: TokenCounter
    """Token counter of the model."""
    budget: Budget = _DEFAULT_BUDGET
    """Token budget of each assembled context."""
    available_agents: str = ""
    """``<available_agents>`` listing for workers that may delegate."""
    turn_messages: list[ChatMessage] = field(default_factory=list)
    """Messages added during this turn (tool calls with results, validated work)."""
    tool_memo: dict[str, str] = field(default_factory=dict)
    """Results of read-only tool calls of this turn (identical later calls reuse them)."""
    profile: str | None = None
    """Context profile the worker is assembled with (builder, verifier ...); ``None``:
    the ``worker`` profile."""
    _view_snapshot: Snapshot | None = field(default=None, repr=False)
    _views: dict[str, ContextView] = field(default_factory=dict, repr=False)

    @classmethod
    def build(
        cls,
        root: Path | str,
        options: SnapshotOptions,
        *,
        counter: TokenCounter,
        budget: Budget | None = None,
        available_agents: str = "",
        profile: str | None = None,
    ) -> TurnContext:
        """Build the turn's snapshot (directive read fresh) and wrap it.

        ``options`` say what the snapshot is read from (task, conversation
        store and session, persona texts, handover ...); ``counter`` and the
        budget's size replace theirs. ``profile`` names the context profile of
        the worker (an unknown name is a :class:`~personae.errors.ConfigError`
        with the closest one).
        """
        budget = budget or _DEFAULT_BUDGET
        roles = options.roles
        if roles is None:  # the turn's roles: what they do not show is not read
            roles = ("manager", "validator", "worker", *((profile,) if profile else ()))
        snapshot = Snapshot.build(
            root, options, counter=counter, max_tokens=budget.tokens, roles=roles
        )
        if profile is not None:
            (snapshot.profiles or load_profiles(snapshot.root)).get(profile)
        return cls(
            snapshot=snapshot,
            counter=counter,
            budget=budget,
            available_agents=available_agents,
            profile=profile,
        )

    # -- what the turn knows --------------------------------------------------------
    @property
    def task(self) -> str:
        """The user's request for this turn."""
        return self.snapshot.content("task") or ""

    @property
    def directive(self) -> str:
        """The directive as read this turn."""
        return self.snapshot.content("directive") or ""

    @property
    def summary(self) -> str:
        """The conversation summary (path A), or empty."""
        return self.snapshot.content("summary") or ""

    @property
    def persona_name(self) -> str:
        """The active persona's name, or empty."""
        return self.snapshot.persona or ""

    @property
    def messages(self) -> tuple[ChatMessage, ...]:
        """Stored recent messages followed by this turn's messages."""
        return (*self.snapshot.messages, *self.turn_messages)

    # -- growing during the turn ----------------------------------------------------
    def _next_seq(self) -> int:
        return max((m.seq for m in self.messages), default=0) + 1

    def _add(self, *messages: ChatMessage) -> None:
        self.turn_messages.extend(messages)
        self._view_snapshot = None
        self._views.clear()

    def add_tool_result(self, tool: str, args: dict[str, Any], result: str) -> None:
        """A tool call of this turn and its result (kept as one exchange)."""
        seq = self._next_seq()
        call_id = f"turn-call-{seq}"
        arguments = json.dumps(args, sort_keys=True, separators=(",", ":"), default=str)
        self._add(
            ChatMessage(
                role="assistant",
                content="",
                tool_calls=(ChatToolCall(id=call_id, name=tool, arguments=arguments),),
                seq=seq,
            ),
            ChatMessage(role="tool", content=result, tool_call_id=call_id, seq=seq + 1),
        )

    def add_assistant(self, text: str) -> None:
        """An assistant message of this turn (validated work)."""
        self._add(ChatMessage(role="assistant", content=text, seq=self._next_seq()))

    # -- role views ------------------------------------------------------------------
    def shared_view(self) -> ContextView:
        """The shared snapshot sections only, for a ``fork`` sub-agent (never the parent's prompt).

        The worker profile's sections minus :data:`PRIVATE_SOURCES`: directive,
        summary, handover, recent messages (with this turn's tool results),
        never the parent's persona prompt or execution block.
        """
        snap = self.snapshot
        profiles = snap.profiles or load_profiles(snap.root)
        worker = profiles.get("worker")
        shared = Profile(
            role=FORK_ROLE,
            description="A forked sub-agent: the shared sections of the worker view.",
            sections=tuple(s for s in worker.sections if s.source not in PRIVATE_SOURCES),
        )
        derived = ProfileSet(
            profiles={**profiles.profiles, FORK_ROLE: shared},
            tags=profiles.tags,
            files=profiles.files,
        )
        self.view("worker")  # builds the view snapshot with this turn's messages
        source = self._view_snapshot or snap
        assembled = assemble_snapshot(
            source, FORK_ROLE, self.budget, self.counter, profiles=derived
        )
        return ContextView(
            role=FORK_ROLE,
            text=assembled.render(),
            report=assembled.report(),
        )

    def _profile(self, role: str) -> Profile | None:
        """The worker's named profile, with the turn's recent messages when it has none.

        A fresh-context profile is a context without conversation; within a
        turn the worker still needs the tool results of earlier subtasks, so
        the ``worker`` profile's messages section is added (before a trailing
        ``instructions`` section, which stays last).
        """
        if role != "worker" or self.profile is None:
            return None
        profiles = self.snapshot.profiles or load_profiles(self.snapshot.root)
        chosen = profiles.get(self.profile)
        if any(s.source == SectionSource.MESSAGES for s in chosen.sections):
            return chosen
        extra = [s for s in profiles.get("worker").sections if s.source == SectionSource.MESSAGES]
        sections = list(chosen.sections)
        at = len(sections) - 1 if sections and sections[-1].tag == "instructions" else len(sections)
        sections[at:at] = extra[:1]
        return chosen.model_copy(update={"sections": tuple(sections)})

    def view(self, role: RoleName) -> ContextView:
        """The role's assembled context (cached until the turn's messages change)."""
        cached = self._views.get(role)
        if cached is not None:
            return cached
        if self._view_snapshot is None:
            self._view_snapshot = (
                self.snapshot
                if not self.turn_messages
                else dataclasses.replace(
                    self.snapshot,
                    id=f"{self.snapshot.id}+{len(self.turn_messages)}",
                    messages=self.messages,
                )
            )
        assembled = assemble_snapshot(
            self._view_snapshot, role, self.budget, self.counter, profile=self._profile(role)
        )
        view = ContextView(role=role, text=assembled.render(), report=assembled.report())
        self._views[role] = view
        return view
