"""Sub-agents: the ``agent`` tool and the child run it starts.

The child runs with the named persona's system prompt verbatim (nothing of
the parent's), the parent's tools narrowed to the persona's list (the same
tool instances; a fresh copy on a temporary root when the persona
``needs_temp_workspace``, deleted afterwards even on error), a fresh step
budget of its ``max_steps``, and the context its persona's mode asks for. The
parent gets a typed :class:`SubagentOutcome`, never the child's transcript.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from pydantic_ai.exceptions import ModelAPIError, UnexpectedModelBehavior, UsageLimitExceeded
from pydantic_ai.messages import ModelMessage
from pydantic_ai.toolsets import AbstractToolset, CombinedToolset, FunctionToolset

from personae.errors import UnknownNameError
from personae.limits import DEFAULTS
from personae.persona.model import ContextMode, Persona
from personae.project import SandboxConfig
from personae.team.events import RunWarning, SubagentEnded, SubagentStarted
from personae.team.loopdetect import LoopDetector
from personae.team.mcp_servers import McpHub
from personae.team.recording import RecordingToolset, tool_call_emitter
from personae.team.runtime import CallInfo, CallOptions, Runtime, SubagentBrief
from personae.team.signals import SubagentStatus
from personae.team.toolbox import narrow_names, narrow_sandbox, persona_limits
from personae.team.turn_context import TurnContext
from personae.team.worker import DEFAULT_MAX_STEPS
from personae.tools.subset import ToolSubset
from personae.tools.workspace import Workspace

__all__ = ["DEFAULT_DEPTH_CAP", "Parent", "Spawner", "SubagentOutcome", "child_prompt"]

DEFAULT_DEPTH_CAP = DEFAULTS.subagent_depth_cap
"""Deepest nesting of sub-agents (a depth-2 child cannot spawn)."""


class SubagentOutcome(BaseModel):
    """What the parent receives from an ``agent`` call."""

    persona: str
    """The persona that ran."""
    status: SubagentStatus
    """success; partial (finished with failed tool calls); failed; limit (budget hit)."""
    final_message: str
    """The child's final message (only this, not its transcript)."""
    progress_made: bool
    """The child did something that worked (a successful tool call or a final message)."""
    context_mode: ContextMode | None
    """The context mode used (``None``: refused before a persona was chosen)."""
    usage: dict[str, int] = Field(default_factory=dict)
    """requests and tool_calls of the child (the run's total is shared)."""
    tools_used: list[str] = Field(default_factory=list)
    """Tools the child used."""
    error: str | None = None
    """Why it failed or stopped."""


def _not_run(persona: str, context_mode: ContextMode | None, error: str) -> SubagentOutcome:
    """The outcome of a spawn refused before the child ran."""
    return SubagentOutcome(
        persona=persona, status="failed", final_message="", progress_made=False,
        context_mode=context_mode, error=error,
    )  # fmt: skip


def child_prompt(mode: ContextMode, task: str, turn: TurnContext | None) -> str:
    """The child's first message for a context mode (the task is always included)."""
    task_block = f"<task>\n{task}\n</task>"
    if mode is ContextMode.ISOLATED or turn is None:
        return task_block
    parts: list[str] = []
    if mode is ContextMode.FORK:
        # The shared sections only: never the parent's persona prompt or execution block.
        parts.append(turn.shared_view().text)
    else:
        if turn.summary.strip():
            parts.append(f"<conversation_summary>\n{turn.summary.strip()}\n</conversation_summary>")
        if turn.directive.strip():
            parts.append(f"<directive>\n{turn.directive.strip()}\n</directive>")
        if turn.persona_name:
            parts.append(f"<parent_persona>{turn.persona_name}</parent_persona>")
        if mode is ContextMode.SUMMARY_RECENT:
            recent = "\n".join(
                f"[{m.role}] {m.content or ', '.join(c.name for c in m.tool_calls)}"
                for m in turn.messages[-6:]
            )
            if recent:
                parts.append(f"<recent_messages>\n{recent}\n</recent_messages>")
    parts.append(task_block)
    return "\n\n".join(p for p in parts if p)


@dataclass(frozen=True, kw_only=True)
class Parent:
    """What an agent hands the sub-agents it spawns: they may only narrow it."""

    box: ToolSubset
    """Its built-in tools (a child's are cut from these)."""
    allowed: frozenset[str]
    """Every tool name it may call (built-in, MCP and ``agent``)."""
    mcp: AbstractToolset[Any] | None = None
    """Its MCP toolset (a child's MCP tools are cut from it, on the same servers)."""
    depth: int = 0
    """Its nesting depth (the worker: 0); its children run one deeper."""
    subtask: int | None = None
    """The subtask it works on (its children's events carry it)."""
    persona: Persona | None = None
    """Its persona (its spawn list, when it has one, limits whom it may spawn)."""


@dataclass(kw_only=True)
class Spawner:
    """The state of one team run: builds every agent's toolset and runs sub-agents.

    One :meth:`toolset_for` serves the worker and every sub-agent, so the
    narrow-only rule is the same for both.
    """

    runtime: Runtime
    """The run's shared runtime (usage is shared across the tree)."""
    personas: Mapping[str, Persona]
    """Personas that may be spawned, by name."""
    turn: TurnContext | None = None
    """The parent's turn context (for brief/summary_recent/fork modes)."""
    depth_cap: int = DEFAULT_DEPTH_CAP
    """Deepest allowed nesting."""
    mcp: McpHub | None = None
    """The turn's MCP servers (a child gets only MCP tools its parent has)."""
    sandbox: SandboxConfig | None = None
    """The project's sandbox settings: a child's ``run_shell`` then uses its own persona's
    grants cut to its parent's (:func:`~personae.team.toolbox.narrow_sandbox`)."""

    async def toolset_for(
        self,
        persona: Persona,
        *,
        box: ToolSubset,
        subtask: int | None,
        parent: Parent | None = None,
    ) -> tuple[AbstractToolset[Any], frozenset[str]]:
        """``persona``'s toolset and the names it may call: ``box`` narrowed to its list, its
        MCP tools, and the ``agent`` tool when it may spawn.

        The worker passes no ``parent`` (it picks from ``box`` and starts its own MCP
        servers); a sub-agent gets only what ``parent`` has (narrow only): its names, its
        MCP tools, its ``run_shell`` sandbox cut to the parent's, and no ``agent`` tool at
        the depth cap. ``subtask``: the subtask the agent works on (a sub-agent: its
        parent's), handed on to the agents it spawns.
        """
        parent_allowed = None if parent is None else parent.allowed
        depth = 0 if parent is None else parent.depth + 1
        offered = {*box.names, "agent"} if parent_allowed is None else parent_allowed
        wanted = narrow_names(persona, offered)
        own = box.narrow([n for n in wanted if n in box])
        if parent is not None and self.sandbox is not None:
            grants = persona_limits(self.sandbox, persona, box.limits)
            own = own.with_limits(narrow_sandbox(box.limits, grants))
        allowed = frozenset(own.names)
        parts: list[AbstractToolset[Any]] = [own]
        mcp_tools: AbstractToolset[Any] | None = None
        if self.mcp is not None:
            mcp_tools, mcp_names = await self.mcp.toolset_for(
                persona,
                parent_allowed=parent_allowed,
                parent=None if parent is None else parent.mcp,
            )
            if mcp_tools is not None:
                allowed |= mcp_names
                parts.append(mcp_tools)
        may_spawn = bool(self.personas) if parent is None else depth < self.depth_cap
        if "agent" in wanted and may_spawn:
            allowed |= {"agent"}
            handed = Parent(
                box=own, allowed=allowed, mcp=mcp_tools, depth=depth, subtask=subtask,
                persona=persona,
            )  # fmt: skip
            parts.append(self.toolset(handed))
        return (parts[0] if len(parts) == 1 else CombinedToolset(parts)), allowed

    def toolset(self, parent: Parent) -> AbstractToolset[Any]:
        """A toolset with the ``agent`` tool for ``parent`` (its spawn list, when it has
        one, is enforced on every call)."""
        spawner = self

        async def agent(name: str, task: str) -> dict[str, Any]:
            """Delegate a task to a named sub-agent persona; returns its outcome.

            Args:
                name: Persona name from <available_agents>.
                task: The complete task for the sub-agent (it sees nothing else).
            """
            return (await spawner.spawn(name, task, parent)).model_dump()

        return FunctionToolset([agent])

    async def spawn(self, name: str, task: str, parent: Parent) -> SubagentOutcome:
        """Run persona ``name`` on ``task`` as a child of ``parent`` (one level deeper),
        with tools narrowed from the parent's.

        A parent persona with a spawn list may only spawn the personas on it; any other
        name is refused (the outcome names the allowed personas) without running.
        """
        subtask, by = parent.subtask, parent.persona
        spawnable = self.personas
        if by is not None and by.subagents is not None:
            spawnable = {n: p for n, p in self.personas.items() if n in by.subagents}
            if name not in spawnable:
                allowed_names = ", ".join(sorted(spawnable)) or "none"
                error_text = (
                    f"persona {by.name!r} may not spawn {name!r}; it may spawn: {allowed_names}"
                )
                self.runtime.emit(
                    RunWarning(
                        message=f"refused spawn: {error_text}", subtask=subtask,
                        action="spawn_refused", details={"persona": name, "parent": by.name},
                    )
                )  # fmt: skip
                return _not_run(name, None, error_text)
        persona = spawnable.get(name)
        if persona is None:
            return _not_run(name, None, str(UnknownNameError("persona", name, spawnable)))
        mode = persona.context
        depth = parent.depth + 1
        if depth > self.depth_cap:
            return _not_run(name, mode, f"sub-agent depth cap of {self.depth_cap} reached")
        start = f"spawn {name} (context: {mode.value}, depth {depth})"
        self.runtime.emit(
            SubagentStarted(
                message=start, subtask=subtask, persona=name, context_mode=mode,
                depth=depth, task=task,
            )
        )  # fmt: skip
        temp: Path | None = None
        try:
            child_box = parent.box
            if persona.needs_temp_workspace:
                temp = Path(tempfile.mkdtemp(prefix=f"personae-{name}-"))
                child_box = parent.box.with_workspace(Workspace(temp))
            outcome = await self._run_child(
                persona, task=task, box=child_box, parent=parent, temp=temp
            )
        finally:
            if temp is not None:
                shutil.rmtree(temp, ignore_errors=True)
        self.runtime.emit(
            SubagentEnded(
                message=f"{name} finished: {outcome.status}", subtask=subtask, persona=name,
                context_mode=mode, status=outcome.status,
                progress_made=outcome.progress_made, usage=outcome.usage,
                temp_workspace=str(temp) if temp else None,
            )
        )  # fmt: skip
        return outcome

    async def _run_child(
        self, persona: Persona, *, task: str, box: ToolSubset, parent: Parent, temp: Path | None
    ) -> SubagentOutcome:
        # Narrow only: the child never gets a tool its parent lacks.
        subtask, depth = parent.subtask, parent.depth + 1
        base, allowed = await self.toolset_for(persona, box=box, subtask=subtask, parent=parent)
        recorder = RecordingToolset(
            wrapped=base,
            allowed=allowed,
            persona=persona.name,
            detector=LoopDetector(),
            on_call=tool_call_emitter(
                self.runtime, subtask=subtask, persona=persona.name, depth=depth
            ),
            gate=self.runtime.hooks,
            subtask=subtask,
            depth=depth,
        )
        prompt = child_prompt(persona.context, task, self.turn)
        if temp is not None:
            prompt += f"\n\n<workspace>{temp}</workspace>"
        info = CallInfo(
            role="subagent",
            persona=persona.name,
            subtask=subtask,
            context_text=f"{persona.system_prompt}\n\n{prompt}",
            budget=SubagentBrief(
                context_mode=persona.context,
                depth=depth,
                tokens=self.turn.counter.count(prompt) if self.turn is not None else None,
                counter=self.turn.counter.name if self.turn is not None else None,
            ),
        )
        steps = persona.max_steps or DEFAULT_MAX_STEPS
        before = self.runtime.usage.requests
        status: SubagentStatus = "success"
        messages: list[ModelMessage] = []
        final, error = "", None
        try:
            output, _ = await self.runtime.call(
                info,
                instructions=persona.system_prompt,
                prompt=prompt,
                options=CallOptions(
                    persona_model=persona.model, toolsets=[recorder], max_steps=steps
                ),
                messages_out=messages,
            )
            final = str(output)
        except UsageLimitExceeded as exc:
            status, error = "limit", str(exc)
        except (ModelAPIError, UnexpectedModelBehavior, TimeoutError, OSError) as exc:
            status, error = "failed", f"{type(exc).__name__}: {exc}"
        recorder.record_refused(messages)
        if status == "success" and recorder.log.failed:
            status = "partial"
        log = recorder.log
        return SubagentOutcome(
            persona=persona.name,
            status=status,
            final_message=final,
            progress_made=bool(log.tools_used) or bool(final.strip()),
            context_mode=persona.context,
            usage={
                "requests": self.runtime.usage.requests - before,
                "tool_calls": len(log.calls),
            },
            tools_used=log.tools_used,
            error=error,
        )
