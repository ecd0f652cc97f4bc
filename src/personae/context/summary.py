"""The condensed conversation summary: request, cap, refresh.

Before a turn, :func:`refresh_summary` finds the messages that left the recent
window since the stored summary, asks an async ``summarize(request)`` (a
model call made by the caller, with :data:`SUMMARY_INSTRUCTIONS`) to fold
them into the previous summary, cuts the answer to the cap and stores it. On
any error it stores nothing and says so: the turn then takes path B (trim
only) and the report carries the reason.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from personae.context._conversation import pending_summary
from personae.context._textcut import count_small, cut_text
from personae.context.messages import ChatMessage
from personae.tokens.base import TokenCounter

if TYPE_CHECKING:
    from personae.store.conversations import ConversationStore

__all__ = [
    "SUMMARY_CAP",
    "SUMMARY_INSTRUCTIONS",
    "SummaryRefresh",
    "cap_summary",
    "refresh_summary",
    "summary_request",
]

SUMMARY_CAP = 300
"""Most tokens a stored summary may take."""

SUMMARY_INSTRUCTIONS = (
    "You condense a conversation between a user and an AI team into a running summary. "
    "Keep decisions, facts found (with file names and figures), open questions and what "
    "the user asked for; drop greetings and repetition. Write plain sentences or short "
    "bullets, at most {cap} tokens. Answer with the summary only."
)
"""The summarizer's own small prompt (``{cap}`` is filled in)."""

_CLIP = 1200  # characters of one message shown to the summarizer
_REQUEST_CHARS = 24_000  # most characters of new messages in one request

Summarize = Callable[[str], Awaitable[str]]


def _line(msg: ChatMessage) -> str:
    text = msg.content.strip()
    if len(text) > _CLIP:
        text = f"{text[:_CLIP]} [… {len(text) - _CLIP} more characters]"
    if msg.role == "tool":
        return f"[tool result {msg.tool_call_id}] {text}"
    calls = "".join(f" [calls {c.name}({c.arguments[:200]})]" for c in msg.tool_calls)
    return f"[{msg.role}] {text}{calls}"


def summary_request(previous: str | None, messages: Sequence[ChatMessage]) -> str:
    """The user prompt: the previous summary, then only the newly evicted messages.

    When the new messages are very long, the oldest are left out of the request
    with a note (the newest matter most to the next turn).
    """
    lines = [_line(m) for m in messages]
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        if size + len(line) > _REQUEST_CHARS and kept:
            kept.append(f"[{len(lines) - len(kept)} older messages not shown]")
            break
        kept.append(line)
        size += len(line)
    kept.reverse()
    head = previous.strip() if previous and previous.strip() else "(none yet)"
    body = "\n".join(kept)
    return (
        f"<previous_summary>\n{head}\n</previous_summary>\n\n"
        f"<new_messages>\n{body}\n</new_messages>\n\n"
        "Fold the new messages into the previous summary and answer with the updated summary."
    )


def cap_summary(text: str, counter: TokenCounter, cap: int = SUMMARY_CAP) -> str:
    """``text`` cut to at most ``cap`` tokens (with a notice when cut)."""
    text = text.strip()
    if count_small(counter, text) <= cap:
        return text
    cut = cut_text(text, cap, counter, "[summary cut to its cap]")
    return cut.text if cut is not None else ""


@dataclass(frozen=True)
class SummaryRefresh:
    """What :func:`refresh_summary` did."""

    ok: bool
    """False when the summarizer failed (take path B)."""
    folded: int = 0
    """Messages newly folded into the summary."""
    summary: str | None = None
    """The summary now stored (``None``: none)."""
    warning: str | None = None
    """Why the turn falls back to path B, when it does."""


async def refresh_summary(
    conv: ConversationStore,
    session: str,
    counter: TokenCounter,
    summarize: Summarize,
    *,
    recent: int,
    cap: int = SUMMARY_CAP,
) -> SummaryRefresh:
    """Fold the messages evicted since the stored summary into it (one call, capped, stored).

    ``summarize(request)`` gets :func:`summary_request` text and returns the new
    summary; anything it raises (or a blank answer) leaves the store unchanged
    and returns ``ok=False`` with the reason.
    """
    pending = pending_summary(conv, session, counter, recent=recent)
    if pending is None or not pending.new:
        return SummaryRefresh(True, 0, pending.previous if pending else None)
    try:
        answer = await summarize(summary_request(pending.previous, pending.new))
        if not isinstance(answer, str) or not answer.strip():
            raise ValueError("the summarizer answered with no text")
    except Exception as exc:  # any model error: trim instead (path B)
        why = (
            f"summary model call failed ({type(exc).__name__}: {str(exc)[:200]}); "
            "used path B (trim only)"
        )
        return SummaryRefresh(False, 0, pending.previous, why)
    text = cap_summary(answer, counter, cap)
    conv.save_summary(session, pending.start_seq - 1, text)
    return SummaryRefresh(True, len(pending.new), text)
