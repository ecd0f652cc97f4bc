"""The condensed conversation summary: request, cap, refresh.

Before a turn, :func:`refresh_summary` finds the messages that left the recent
window since the stored summary, asks an async ``summarize(request)`` (a
model call made by the caller, with :data:`SUMMARY_INSTRUCTIONS`) to fold
them into the previous summary, cuts the answer to the cap and stores it. On
any error it stores nothing and says so: the turn then takes path B (trim
only) and the report carries the reason.

Pinned items (:mod:`personae.context.pinned`: rules, user decisions, sub-agent
results, the assistant's commitments) never go through the summarizer: they are
found in the new messages, added to the previous summary's pinned items and
written verbatim ahead of the condensed rest. :data:`SUMMARY_CAP` bounds the
condensed rest only; pinned items are never cut or dropped, and when they take
more than :data:`PINNED_CAP` tokens the refresh says so in a warning (the run's
report carries it). Each refresh reads only the previous summary and the newly
evicted messages: nothing older is read again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from personae.context._conversation import pending_summary
from personae.context._textcut import count_small, cut_text
from personae.context.messages import ChatMessage
from personae.context.pinned import find_pinned, join_summary, merge_pinned, split_summary
from personae.tokens.base import TokenCounter

if TYPE_CHECKING:
    from personae.store.conversations import ConversationStore

__all__ = [
    "EXTRACTIVE_LINES",
    "PINNED_CAP",
    "SUMMARY_CAP",
    "SUMMARY_INSTRUCTIONS",
    "SummaryRefresh",
    "cap_summary",
    "extractive_summary",
    "fold_summary",
    "pinned_warning",
    "refresh_summary",
    "summary_request",
]

SUMMARY_CAP = 300
"""Most tokens the condensed rest of a stored summary may take (pinned items come on top)."""
PINNED_CAP = 1500
"""Pinned tokens past which a refresh warns (the items are still all kept)."""
EXTRACTIVE_LINES = 40
"""Most lines of condensed rest :func:`extractive_summary` keeps (newest kept)."""

SUMMARY_INSTRUCTIONS = (
    "You condense a conversation between a user and an AI team into a running summary. "
    "Keep decisions, facts found (with file names and figures), open questions and what "
    "the user asked for; drop greetings and repetition. Rules, the user's decisions, "
    "sub-agent results and the assistant's commitments are kept word for word beside your "
    "summary: you need not repeat them. Write plain sentences or short bullets, at most "
    "{cap} tokens. Answer with the summary only."
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


def pinned_warning(summary: str | None, counter: TokenCounter) -> str | None:
    """A warning when ``summary``'s pinned items take more than :data:`PINNED_CAP` tokens."""
    pinned, _ = split_summary(summary)
    if not pinned:
        return None
    size = counter.count("\n".join(p.entry() for p in pinned))
    if size <= PINNED_CAP:
        return None
    return (
        f"the conversation summary's {len(pinned)} pinned items take {size} tokens, over "
        f"the pinned cap of {PINNED_CAP}; all are kept (pinned items are never dropped)"
    )


def fold_summary(
    previous: str | None,
    new: Sequence[ChatMessage],
    rest: str,
    counter: TokenCounter,
    cap: int = SUMMARY_CAP,
) -> str:
    """The next summary: ``previous``'s pinned items, those of ``new``, then ``rest``
    (the condensed rest, cut to ``cap`` tokens)."""
    pinned = merge_pinned(split_summary(previous)[0], find_pinned(new))
    return join_summary(pinned, cap_summary(rest, counter, cap))


def extractive_summary(previous: str | None, messages: Sequence[ChatMessage]) -> str:
    """Fold messages into a running summary without a model call.

    Pinned items are carried verbatim (:func:`fold_summary`); the condensed rest keeps
    the first line of each user and assistant message (200 characters at most) and
    only the newest :data:`EXTRACTIVE_LINES` lines.
    """
    pinned, rest = split_summary(previous)
    lines = rest.splitlines() if rest else []
    for message in messages:
        text = message.content.strip().splitlines()
        if message.role in ("user", "assistant") and text:
            lines.append(f"- {message.role}: {text[0][:200]}")
    pinned = merge_pinned(pinned, find_pinned(messages))
    return join_summary(pinned, "\n".join(lines[-EXTRACTIVE_LINES:]))


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
    notice: str | None = None
    """When the pinned items are over :data:`PINNED_CAP` (the summary still has them all)."""


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

    ``summarize(request)`` gets :func:`summary_request` text (the previous summary's
    condensed rest and the new messages) and returns the new condensed rest; the
    stored summary is :func:`fold_summary` of it. Anything ``summarize`` raises (or a
    blank answer) leaves the store unchanged and returns ``ok=False`` with the reason.
    """
    pending = pending_summary(conv, session, counter, recent=recent)
    if pending is None or not pending.new:
        previous = pending.previous if pending else None
        return SummaryRefresh(True, 0, previous, notice=pinned_warning(previous, counter))
    try:
        answer = await summarize(summary_request(split_summary(pending.previous)[1], pending.new))
        if not isinstance(answer, str) or not answer.strip():
            raise ValueError("the summarizer answered with no text")
    except Exception as exc:  # any model error: trim instead (path B)
        why = (
            f"summary model call failed ({type(exc).__name__}: {str(exc)[:200]}); "
            "used path B (trim only)"
        )
        return SummaryRefresh(False, 0, pending.previous, why)
    text = fold_summary(pending.previous, pending.new, answer, counter, cap)
    conv.save_summary(session, pending.start_seq - 1, text)
    return SummaryRefresh(True, len(pending.new), text, notice=pinned_warning(text, counter))
