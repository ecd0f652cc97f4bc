"""Loading the conversation part of a snapshot from the store (paths A and B)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from personae.context.messages import CUT_ORIGIN_EVERY, ChatMessage, from_stored, group_units
from personae.tokens.base import TokenCounter

if TYPE_CHECKING:
    from personae.store.conversations import ConversationStore

__all__: list[str] = []

Summarizer = Callable[[str | None, Sequence[ChatMessage]], str]


@dataclass(frozen=True)
class Loaded:
    summary: str | None
    summary_tokens: int | None
    messages: tuple[ChatMessage, ...]
    earlier: int
    path: str
    folded: int
    warning: str | None = None


Reads = dict[Hashable, Any]
"""A session's earlier reads (kept by its window). Per read: the newest seq seen,
the messages last read (oldest first), whether they reach back to the session's
first message, and what the read kept. Per path-B load: the session's
``(message_count, last_seq)`` and the :class:`Loaded` result. Stored messages
never change, so a later turn reads only what was appended since (and keeps the
same messages, or the same result, when nothing was)."""
_MAX_READS = 32


class Span(NamedTuple):
    """How much of the newest history a path-B read keeps."""

    want: int
    """At least this many messages (whole exchanges)."""
    hard_max: int
    """Past this many without a user message, skip ahead to the latest user message."""
    token_limit: int | None = None
    """Stop once the stored counts of what was read exceed this."""

    @classmethod
    def of(cls, recent: int, token_limit: int | None = None) -> Span:
        """The span read for a recent window of ``recent`` messages."""
        return cls(max(recent * 2, 12), max(recent * 64, 512), token_limit)


def _tail(
    conv: ConversationStore,
    session: str,
    counter: TokenCounter,
    span: Span,
    *,
    last_seq: int | None = None,
    reads: Reads | None = None,
) -> list[ChatMessage]:
    """The newest messages: at least ``span.want``, whole exchanges, always the latest
    user message.

    Reads newest first and stops as soon as it has enough, so the cost follows
    what is kept, not the length of the history. Past ``span.hard_max`` messages
    without a user message (one very long agent turn) it skips ahead to the
    latest user message and keeps it. With ``reads`` (the session window's),
    the messages an earlier call read for the session are reused (the same objects, so the
    session's window recognises them) and only newer ones are read; with the
    session's ``last_seq`` known, nothing is read when nothing was appended.
    """
    if reads is None:
        reads = {}
    key = (str(conv.store.path), session, counter.name, *span)
    cached: tuple[int, list[ChatMessage], bool, list[ChatMessage]] | None = reads.get(key)
    if cached is not None:
        seen_seq, old, whole, kept = cached
        if last_seq == seen_seq:
            return kept  # nothing appended: the same scan over the same messages
        fresh: list[ChatMessage] = []
        for raw in conv.iter_backward(session, counter=counter):
            if int(raw.seq or 0) <= seen_seq:
                break
            fresh.append(from_stored(raw))
        if not fresh:
            return kept  # the same scan over the same messages: the same result
        out, stop, skipped = _scan([*fresh, *reversed(old)], span)
        if stop is not None or whole:
            _remember(reads, key, out=out, stop=stop, whole=whole and stop is None, skipped=skipped)
            return out
    source = (from_stored(raw) for raw in conv.iter_backward(session, counter=counter))
    out, stop, skipped = _scan(source, span)
    _remember(reads, key, out=out, stop=stop, whole=stop is None, skipped=skipped)
    return out


def _remember(
    reads: Reads,
    key: Hashable,
    *,
    out: list[ChatMessage],
    stop: ChatMessage | None,
    whole: bool,
    skipped: bool,
) -> None:
    """Keep a contiguous read (with the message the scan stopped on) for the next turn."""
    if skipped or not out:
        reads.pop(key, None)
        return
    read = out if stop is None or stop is out[0] else [stop, *out]
    if key not in reads and len(reads) >= _MAX_READS:
        reads.clear()  # rare: a session read with many windows and limits
    reads[key] = (out[-1].seq, read, whole, out)


def _scan(
    source: Iterable[ChatMessage], span: Span
) -> tuple[list[ChatMessage], ChatMessage | None, bool]:
    """Kept messages (oldest first) from newest-first ``source``; the message the scan
    stopped on (``None``: it read all of ``source``); whether it skipped messages."""
    out: list[ChatMessage] = []
    stop: ChatMessage | None = None
    want, hard_max, token_limit = span
    seen_user = skipped = False
    tokens = 0
    origin: int | None = None
    for msg in source:
        if token_limit is not None and tokens > token_limit:
            if origin is None:  # read on to where a cut grid starts (see CUT_ORIGIN_EVERY)
                origin = msg.seq // CUT_ORIGIN_EVERY * CUT_ORIGIN_EVERY
            if seen_user and msg.role != "tool" and msg.seq < origin:
                stop = msg
                break  # older messages cannot be shown within the budget anyway
        tokens += msg.tokens if msg.tokens is not None else len(msg.content) // 2
        if len(out) >= hard_max and not seen_user:
            skipped = True
            if msg.role == "user":
                out.append(msg)
                stop = msg
                break
            continue
        out.append(msg)
        seen_user = seen_user or msg.role == "user"
        if len(out) >= want and seen_user and msg.role != "tool":
            stop = msg
            break  # an exchange head: the oldest kept exchange is whole
    out.reverse()
    return out, stop, skipped


def _window(
    conv: ConversationStore, session: str, counter: TokenCounter, recent: int
) -> list[ChatMessage]:
    """Whole exchanges, newest first, while they fit in ``recent`` messages (path A).

    The latest user turn is always included, however long it is.
    """
    out: list[ChatMessage] = []
    pending: list[ChatMessage] = []
    seen_user = False
    for raw in conv.iter_backward(session, counter=counter):
        msg = from_stored(raw)
        pending.append(msg)
        if msg.role == "tool":
            continue
        if seen_user and len(out) + len(pending) > recent:
            break
        out.extend(pending)
        pending = []
        seen_user = seen_user or msg.role == "user"
    out.reverse()
    return out


@dataclass(frozen=True)
class Pending:
    """Messages evicted from the recent window since the stored summary."""

    previous: str | None
    """The stored running summary (``None``: none yet)."""
    start_seq: int
    """First message of the recent window; the summary should cover everything before."""
    new: tuple[ChatMessage, ...]
    """Messages after the stored summary and before the window, oldest first."""


def pending_summary(
    conv: ConversationStore, session: str, counter: TokenCounter, *, recent: int
) -> Pending | None:
    """What a path-A summary still has to fold in (``None``: the session is empty)."""
    if int(conv.session(session).message_count) == 0:
        return None
    tail = _window(conv, session, counter, recent)
    units, _ = group_units(tail)
    start_seq = units[0].head.seq if units else tail[-1].seq + 1
    prior = conv.latest_summary(session, counter=counter)
    covers = int(prior.covers_seq) if prior is not None else 0
    new: tuple[ChatMessage, ...] = ()
    if covers < start_seq - 1:
        between = conv.between(session, after_seq=covers, upto_seq=start_seq - 1)
        new = tuple(from_stored(m) for m in between)
    return Pending(prior.text if prior is not None else None, start_seq, new)


def _load_tail(  # noqa: PLR0917  # private, called once
    conv: ConversationStore,
    session: str,
    counter: TokenCounter,
    span: Span,
    reads: Reads | None,
    adopt: Callable[[Sequence[ChatMessage]], tuple[ChatMessage, ...]],
) -> Loaded:
    """Path B. The session's ``(message_count, last_seq)`` is read every call (another
    process may append); when it is the one the previous call saw, stored messages
    being immutable, the previous result is the result."""
    position = conv.position(session)
    total, last_seq = position
    if total == 0:
        return Loaded(None, None, (), 0, "none", 0)
    key = ("loaded", str(conv.store.path), session, counter.name, *span)
    if reads is not None:
        hit = reads.get(key)
        if hit is not None and hit[0] == position:
            loaded: Loaded = hit[1]
            return loaded
    tail = _tail(conv, session, counter, span, last_seq=last_seq, reads=reads)
    loaded = Loaded(None, None, adopt(tail), total - len(tail), "B", 0)
    if reads is not None:
        reads[key] = (position, loaded)
    return loaded


def load_conversation(
    conv: ConversationStore,
    session: str,
    counter: TokenCounter,
    *,
    recent: int,
    summarizer: Summarizer | None,
    token_limit: int | None = None,
    reads: Reads | None = None,
    adopt: Callable[[Sequence[ChatMessage]], tuple[ChatMessage, ...]] = tuple,
) -> Loaded:
    """Path A (summary + last messages) with a summarizer, else path B (trim only).

    ``token_limit`` (path B): stop reading older messages once the stored counts
    of those read exceed it (they could not be shown within such a budget).
    ``reads``: the session window's earlier reads (path B reads only newer rows, and
    returns the previous result itself when nothing was appended). ``adopt``: turns
    path B's messages into the tuple the result carries (the window's ``sync``).
    """
    if summarizer is None:
        return _load_tail(conv, session, counter, Span.of(recent, token_limit), reads, adopt)
    total = int(conv.session(session).message_count)
    if total == 0:
        return Loaded(None, None, (), 0, "none", 0)
    tail = _window(conv, session, counter, recent)
    units, _ = group_units(tail)
    start_seq = units[0].head.seq if units else tail[-1].seq + 1
    tail = [m for m in tail if m.seq >= start_seq]
    prior = conv.latest_summary(session, counter=counter)
    covers = int(prior.covers_seq) if prior is not None else 0
    text = prior.text if prior is not None else None
    tokens = int(prior.tokens) if prior is not None else None
    folded = 0
    if covers < start_seq - 1:
        new = [
            from_stored(m) for m in conv.between(session, after_seq=covers, upto_seq=start_seq - 1)
        ]
        if new:
            try:
                text = summarizer(text, new)
                if not isinstance(text, str):
                    raise TypeError(f"returned {type(text).__name__}, not text")
            except Exception as exc:  # a failing summarizer must not lose the turn
                fallback = _tail(conv, session, counter, Span.of(recent))
                why = f"summarizer failed ({type(exc).__name__}: {exc}); used path B (trim only)"
                return Loaded(None, None, tuple(fallback), total - len(fallback), "B", 0, why)
            saved = conv.save_summary(session, start_seq - 1, text)
            tokens = int(saved.tokens) if saved.counter == counter.name else None
            folded = len(new)
    earlier = 0 if text else max(0, total - len(tail))
    return Loaded(text or None, tokens, tuple(tail), earlier, "A", folded)
