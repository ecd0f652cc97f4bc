"""The per-turn shared context of the team (seed 000's AgentContext) and its role views.

One :class:`TurnContext` is built per turn and given to Manager, Worker and
Validator alike. :meth:`TurnContext.view` renders the role's view: shared
sections byte-identical across roles, the persona execution block for
manager/worker only, the validation context for the validator only. Tool
results of earlier subtasks are added to the recent messages as the turn goes,
so later workers see them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from personae.tokens.base import TokenCounter

__all__ = ["ContextView", "ConversationMessage", "RoleName", "TurnContext", "TurnLimits"]

RoleName = Literal["manager", "worker", "validator"]


@dataclass(frozen=True, kw_only=True)
class ConversationMessage:
    """A message of the conversation (user, assistant or tool)."""

    role: Literal["user", "assistant", "tool", "system"]
    """Who said it."""
    content: str
    """Text."""
    name: str | None = None
    """Tool name for tool messages."""


@dataclass(frozen=True, kw_only=True)
class TurnLimits:
    """Token limits per section (seed 000 defaults)."""

    directive: int = 500
    """Directive tokens."""
    summary: int = 300
    """Conversation summary tokens."""
    recent_messages: int = 6
    """Most recent messages kept."""
    recent_tokens: int = 800
    """Tokens of recent messages."""
    validation: int = 400
    """Validation context tokens."""


@dataclass(frozen=True, kw_only=True)
class ContextView:
    """A role's rendered context and the budget report of how it was fitted."""

    role: str
    """manager, worker or validator."""
    text: str
    """The context text (XML boundary tags)."""
    report: dict[str, Any]
    """Per section: tokens used, limit, truncated."""


class _CharEstimate:
    """chars/4 estimate (used only when no counter is given)."""

    name = "estimate:chars/4"
    exact = False

    def count(self, text: str) -> int:
        return (len(text) + 3) // 4


def _fit(text: str, limit: int, counter: TokenCounter) -> tuple[str, int, bool]:
    tokens = counter.count(text)
    if tokens <= limit:
        return text, tokens, False
    # Cut proportionally, then tighten until it fits; the notice is visible.
    keep = max(0, int(len(text) * limit / max(tokens, 1)) - 40)
    cut = text[:keep]
    while keep > 0 and counter.count(cut) > limit - 12:
        keep = int(keep * 0.9)
        cut = text[:keep]
    return cut + "\n[... truncated to fit the budget]", counter.count(cut), True


@dataclass(kw_only=True)
class TurnContext:
    """Everything the three roles share for one turn."""

    task: str
    """The user's request for this turn."""
    directive: str = ""
    """Directive file contents, read fresh this turn."""
    summary: str = ""
    """Condensed summary of older conversation."""
    recent: list[ConversationMessage] = field(default_factory=list)
    """Recent messages (user, assistant and tool roles)."""
    persona_name: str = ""
    """Active persona."""
    execution_block: str = ""
    """Persona execution block (manager and worker only)."""
    validation_context: str = ""
    """Persona validation context (validator only)."""
    available_agents: str = ""
    """``<available_agents>`` listing for personas that may delegate."""
    limits: TurnLimits = field(default_factory=TurnLimits)
    """Section limits."""
    counter: TokenCounter = field(default_factory=_CharEstimate)
    """Token counter for the limits."""

    def add_tool_result(self, tool: str, args: dict[str, Any], result: str) -> None:
        """Make a tool result of this turn visible to later subtasks."""
        self.recent.append(
            ConversationMessage(role="tool", name=tool, content=f"{tool}({args}) -> {result}")
        )

    def add_assistant(self, text: str) -> None:
        """Add an assistant message (validated work of this turn)."""
        self.recent.append(ConversationMessage(role="assistant", content=text))

    def view(self, role: RoleName) -> ContextView:
        """The role's view; shared sections are identical for all roles."""
        sections: list[tuple[str, str, int]] = []
        if self.directive.strip():
            sections.append(("directive", self.directive.strip(), self.limits.directive))
        if self.summary.strip():
            sections.append(("conversation_summary", self.summary.strip(), self.limits.summary))
        recent = self._recent_text()
        if recent:
            sections.append(("recent_messages", recent, self.limits.recent_tokens))
        if role in ("manager", "worker") and self.execution_block.strip():
            sections.append(("persona", self.execution_block.strip(), 10_000))
        if role == "manager" and self.available_agents.strip():
            sections.append(("available_agents_list", self.available_agents.strip(), 10_000))
        if role == "validator" and self.validation_context.strip():
            sections.append(
                ("validation_context", self.validation_context.strip(), self.limits.validation)
            )
        parts: list[str] = []
        report: dict[str, Any] = {"counter": self.counter.name, "sections": {}}
        total = 0
        for tag, body, limit in sections:
            fitted, tokens, truncated = _fit(body, limit, self.counter)
            parts.append(f"<{tag}>\n{fitted}\n</{tag}>")
            report["sections"][tag] = {"tokens": tokens, "limit": limit, "truncated": truncated}
            total += tokens
        report["total_tokens"] = total
        return ContextView(role=role, text="\n\n".join(parts), report=report)

    def _recent_text(self) -> str:
        kept: list[str] = []
        used = 0
        for message in reversed(self.recent[-self.limits.recent_messages :]):
            label = (
                f"tool:{message.name}" if message.role == "tool" and message.name else message.role
            )
            line = f"[{label}] {message.content}"
            cost = self.counter.count(line)
            if kept and used + cost > self.limits.recent_tokens:
                break
            kept.append(line)
            used += cost
        return "\n".join(reversed(kept))
