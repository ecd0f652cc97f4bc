"""Pinned items: what a conversation summary must carry verbatim, however often it is redone.

A running summary condenses the messages that left the recent window. Some things in
them must survive every compaction word for word:

- ``rule``: a directive rule or agreed constraint. Every ``system`` message in the
  conversation; a sentence of a user message that lays down a rule ("always …",
  "never …", "must …", "don't …", "make sure …", "at most …").
- ``decision``: a sentence of a user message that decides ("let's go with …",
  "we decided …", "use X instead", "approved", "stick with …").
- ``result``: a sub-agent's final result, i.e. the ``final_message`` of the answer
  to an ``agent`` tool call (the outcome JSON the parent receives); when the call is
  not among the messages, a tool result shaped like that outcome (``persona``,
  ``status`` and ``final_message``).
- ``commitment``: a sentence in which the assistant, answering the user, commits to
  something: first person and future or promise ("I will …", "I'll make sure …",
  "we'll …", "I won't …", "I promise …", "from now on …"). Only assistant messages
  without tool calls count: the narration before a tool call ("I'll read the file")
  is a step, not a commitment to the user.
- Explicit markers: a line starting with ``Rule:``, ``Constraint:``, ``Decision:``,
  ``Commitment:`` or ``[pin]`` (any role, a tool's output too) is pinned whole, with
  that kind (``[pin]``: ``rule`` for user and system, ``commitment`` for the
  assistant, ``result`` for a tool); the heuristics read the rest of the message.

A summary with pinned items starts with :data:`PINNED_HEAD`, one item per entry as
``[kind · message N · L chars] text``, then :data:`REST_HEAD` and the condensed rest.
The length in the header makes :func:`split_summary` exact for any text (newlines,
brackets, the markers themselves), so the next compaction reads the previous
summary's pinned items back without re-reading the messages they came from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from personae.context.messages import ChatMessage

__all__ = [
    "PINNED_HEAD",
    "REST_HEAD",
    "SUBAGENT_TOOL",
    "PinKind",
    "Pinned",
    "clip_summary",
    "find_pinned",
    "join_summary",
    "merge_pinned",
    "split_summary",
]

PinKind = Literal["rule", "decision", "result", "commitment"]

PINNED_HEAD: Final = "Pinned (kept verbatim through every compaction):"
"""First line of a summary that carries pinned items."""
REST_HEAD: Final = "Summary of the rest:"
"""Line after the pinned items; the condensed rest of the conversation follows it."""
SUBAGENT_TOOL: Final = "agent"
"""Name of the tool that runs a sub-agent (its result's ``final_message`` is pinned)."""

_ENTRY = re.compile(r"\n\[(rule|decision|result|commitment) · message (\d+) · (\d+) chars\] ")
_MARKER = re.compile(
    r"^[ \t]*(?:(rule|constraint|decision|commitment)[ \t]*:|(\[pin\]))[ \t]*:?[ \t]*(\S.*)$",
    re.I | re.M,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_RULE = re.compile(
    r"\b(always|never|must|mustn'?t|do not|don'?t|make sure|ensure|only use|"
    r"no more than|at most|at least|under no circumstances|is forbidden|not allowed)\b",
    re.I,
)
_DECISION = re.compile(
    r"\b(decided|decision|let'?s go with|go with|we'?ll use|use \S+ instead|instead of|"
    r"i choose|i chose|approved?|agreed|stick with|settle on|settled on|i prefer|"
    r"we prefer|final answer is)\b",
    re.I,
)
_COMMITMENT = re.compile(
    r"\b(i|we)\s*(will|'ll|’ll|shall|won'?t|will not|promise|commit to|"
    r"am going to|'m going to|’m going to|are going to|'re going to)\b|\bfrom now on\b",
    re.I,
)


@dataclass(frozen=True, slots=True)
class Pinned:
    """One item a summary carries verbatim."""

    kind: PinKind
    """rule, decision, result (a sub-agent's) or commitment (the assistant's)."""
    text: str
    """The item, exactly as it was said."""
    seq: int = 0
    """The message it came from (its position in the session; 0: unknown)."""

    def entry(self) -> str:
        """The item as written in a summary (its length makes it readable back exactly)."""
        return f"[{self.kind} · message {self.seq} · {len(self.text)} chars] {self.text}"


def _marked(content: str, role: str) -> list[tuple[PinKind, str]]:
    """The explicitly marked lines of ``content`` (``Rule:``, ``Decision:``, ``[pin]`` …)."""
    found: list[tuple[PinKind, str]] = []
    for match in _MARKER.finditer(content):
        word = (match.group(1) or "").lower()
        if match.group(2):  # [pin]: the kind follows the role
            kind: PinKind = {"assistant": "commitment", "tool": "result"}.get(role, "rule")  # type: ignore[assignment]
        else:
            kind = "rule" if word == "constraint" else word  # type: ignore[assignment]
        found.append((kind, match.group(0).strip()))
    return found


def _sentences(text: str) -> Iterable[str]:
    for piece in _SENTENCE.split(text):
        if stripped := piece.strip():
            yield stripped


def _heuristic(role: str, content: str, calls: bool) -> Iterable[tuple[PinKind, str]]:
    if role == "system":
        if content.strip():
            yield "rule", content.strip()
        return
    if role == "user":
        for sentence in _sentences(content):
            if sentence.endswith("?"):
                continue
            if _DECISION.search(sentence):
                yield "decision", sentence
            elif _RULE.search(sentence):
                yield "rule", sentence
    elif role == "assistant" and not calls:
        for sentence in _sentences(content):
            if not sentence.endswith("?") and _COMMITMENT.search(sentence):
                yield "commitment", sentence


def _subagent_result(content: str, *, known: bool) -> str | None:
    """The ``final_message`` of a sub-agent outcome. When the call is not among the
    messages (compacted apart from its result), the outcome's shape must show it."""
    if not content.startswith("{"):
        return None
    try:
        outcome = json.loads(content)
    except ValueError:
        return None
    if not isinstance(outcome, dict) or not (known or {"persona", "status"} <= outcome.keys()):
        return None
    final = outcome.get("final_message")
    return final.strip() if isinstance(final, str) and final.strip() else None


def find_pinned(messages: Sequence[ChatMessage]) -> list[Pinned]:
    """The pinned items of ``messages`` (oldest first, each once)."""
    calls = {c.id: c.name for m in messages for c in m.tool_calls}
    found: list[Pinned] = []
    for msg in messages:
        items = _marked(msg.content, msg.role)
        if msg.role == "tool":
            name = calls.get(msg.tool_call_id or "")
            final = _subagent_result(msg.content, known=name == SUBAGENT_TOOL)
            if final is not None and name in (None, SUBAGENT_TOOL):
                items.append(("result", final))
        else:
            rest = _MARKER.sub("", msg.content) if items else msg.content
            items.extend(_heuristic(msg.role, rest, bool(msg.tool_calls)))
        found.extend(Pinned(kind, text, msg.seq) for kind, text in items)
    return merge_pinned([], found)


def merge_pinned(old: Sequence[Pinned], new: Iterable[Pinned]) -> list[Pinned]:
    """``old`` then the items of ``new`` not already there (same kind and text)."""
    seen = {(p.kind, p.text) for p in old}
    out = list(old)
    for item in new:
        if (item.kind, item.text) not in seen:
            seen.add((item.kind, item.text))
            out.append(item)
    return out


def split_summary(summary: str | None) -> tuple[list[Pinned], str]:
    """A stored summary's pinned items and its condensed rest.

    A summary without :data:`PINNED_HEAD` (written before pinning, or with nothing
    pinned) is all rest.
    """
    text = (summary or "").strip()
    if not text.startswith(PINNED_HEAD):
        return [], text
    pos = len(PINNED_HEAD)
    items: list[Pinned] = []
    entry = _ENTRY.match
    while (match := entry(text, pos)) is not None:
        kind, seq, size = match.groups()
        pos = match.end() + int(size)
        items.append(Pinned(kind, text[match.end() : pos], int(seq)))  # type: ignore[arg-type]
    rest = text[pos:].lstrip("\n")
    if rest.startswith(REST_HEAD):
        rest = rest[len(REST_HEAD) :]
    return items, rest.strip()


def join_summary(pinned: Sequence[Pinned], rest: str) -> str:
    """A summary: the pinned items verbatim, then the condensed rest."""
    rest = rest.strip()
    if not pinned:
        return rest
    entries = "\n".join(p.entry() for p in pinned)
    return f"{PINNED_HEAD}\n{entries}\n{REST_HEAD}\n{rest}".rstrip()


def clip_summary(summary: str, limit: int, *, hard: int) -> str:
    """``summary`` in at most ``limit`` characters, its pinned items kept whole.

    Only the condensed rest is clipped (with ``…``); pinned items alone may take the
    summary past ``limit``, up to ``hard`` characters (a carrier's own bound), past
    which the end is clipped as plain text.
    """
    if len(summary) <= limit:
        return summary
    pinned, rest = split_summary(summary)
    if pinned:
        room = limit - len(join_summary(pinned, "x")) + 1  # what the rest may take
        kept = rest if len(rest) <= room else (rest[: room - 1] + "…" if room > 1 else "")
        summary = join_summary(pinned, kept)
        limit = hard
    return summary if len(summary) <= limit else summary[: limit - 1] + "…"
