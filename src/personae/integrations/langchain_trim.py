"""A drop-in for ``langchain_core.messages.trim_messages`` that keeps histories valid.

Same arguments, same results as LangChain's function (its own unit tests pass
against this one), except where LangChain's result would break the history:

- a tool result is never returned without the assistant message that called it
  (LangChain can start a trimmed history with an orphaned ``ToolMessage``), and
  an assistant's tool calls are never returned without their results;
- with ``strategy="last"`` the latest human message and everything after it
  are always kept: when they alone are over ``max_tokens``, their tool outputs
  (then assistant texts) are shortened with a visible notice, and the human
  message itself is cut only when ``allow_partial=True`` says so;
- ``token_counter="approximate"`` counts exactly with personae's tokenizer.

It searches like LangChain's (the same counter calls on the same lists); a
per-message counter is called once per message, not once per message per step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from itertools import accumulate, compress
from operator import attrgetter
from typing import Any, Literal, cast, overload

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.runnables import Runnable, RunnableLambda

from personae.context.fit_items import fit_items
from personae.integrations._lc_fit import (
    Adapter,
    ListCounter,
    counters,
)

__all__ = ["trim_messages"]

TypeSpec = str | type[BaseMessage] | Sequence[str | type[BaseMessage]] | None
Splitter = Callable[[str], list[str]]


@overload
def trim_messages(
    messages: None = None,
    *,
    max_tokens: int,
    token_counter: Any,
    strategy: Literal["first", "last"] = "last",
    allow_partial: bool = False,
    end_on: TypeSpec = None,
    start_on: TypeSpec = None,
    include_system: bool = False,
    text_splitter: Any = None,
) -> Runnable[Any, list[BaseMessage]]: ...


@overload
def trim_messages(
    messages: Iterable[Any] | Any,
    *,
    max_tokens: int,
    token_counter: Any,
    strategy: Literal["first", "last"] = "last",
    allow_partial: bool = False,
    end_on: TypeSpec = None,
    start_on: TypeSpec = None,
    include_system: bool = False,
    text_splitter: Any = None,
) -> list[BaseMessage]: ...


def trim_messages(
    messages: Iterable[Any] | Any | None = None,
    **options: Any,
) -> list[BaseMessage] | Runnable[Any, list[BaseMessage]]:
    """Trim ``messages`` to ``max_tokens`` as LangChain's ``trim_messages`` does, keeping
    the history valid (see the module docstring for the differences).

    Without ``messages`` it returns a ``Runnable`` that trims what it is given
    (``trim_messages(max_tokens=..., token_counter=...) | model``), as LangChain's does.
    """
    if messages is None:
        return RunnableLambda(partial(_trim, **options), name="trim_messages")
    return _trim(messages, **options)


def _trim(
    messages: Iterable[Any] | Any,
    *,
    max_tokens: int,
    token_counter: Any,
    strategy: Literal["first", "last"] = "last",
    allow_partial: bool = False,
    end_on: TypeSpec = None,
    start_on: TypeSpec = None,
    include_system: bool = False,
    text_splitter: Any = None,
) -> list[BaseMessage]:
    if start_on and strategy == "first":
        raise ValueError("start_on parameter is only valid with strategy='last'")
    if include_system and strategy == "first":
        raise ValueError("include_system parameter is only valid with strategy='last'")
    msgs, kinds = _messages(messages)
    trim = _Trim(token_counter, max_tokens, _splitter(text_splitter), allow_partial)
    if strategy == "first":
        return trim.first(msgs, kinds, end_on)
    return trim.last(msgs, kinds, end_on=end_on, start_on=start_on, include_system=include_system)


def _messages(messages: Iterable[Any] | Any) -> tuple[list[BaseMessage], list[int]]:
    """``messages`` as LangChain messages (``convert_to_messages``) and their :func:`_kind`s;
    a list of messages of classes already seen is taken as it is, without a Python-level
    loop (LangChain's conversion returns each message itself)."""
    if isinstance(messages, list | tuple):
        kinds = list(map(_KINDS.get, map(type, messages)))
        if None not in kinds:
            return list(messages), cast(list[int], kinds)
    msgs = convert_to_messages(messages)
    return msgs, [_kind(m) for m in msgs]


def _splitter(text_splitter: Any) -> Splitter:
    if text_splitter is None:
        return _split_lines
    if hasattr(text_splitter, "split_text"):  # a langchain_text_splitters.TextSplitter
        return text_splitter.split_text  # type: ignore[no-any-return]
    return text_splitter  # type: ignore[no-any-return]


def _split_lines(text: str) -> list[str]:
    splits = text.split("\n")
    return [s + "\n" for s in splits[:-1]] + splits[-1:]


def _is(message: BaseMessage, spec: TypeSpec) -> bool:
    types = [spec] if isinstance(spec, str | type) else list(spec or ())
    return any(message.type == t if isinstance(t, str) else isinstance(message, t) for t in types)


_OTHER, _AI, _TOOL, _HUMAN = 1, 2, 3, 4
_KINDS: dict[type, int] = {}


def _kind(message: BaseMessage) -> int:
    """The message's class as AI, tool, human or other, learnt once per class
    (``isinstance`` on a pydantic model class is a Python-level check: too slow per message)."""
    cls = message.__class__
    kind = _KINDS.get(cls)
    if kind is None:
        kind = (
            _AI if issubclass(cls, AIMessage)
            else _TOOL if issubclass(cls, ToolMessage)
            else _HUMAN if issubclass(cls, HumanMessage)
            else _OTHER
        )  # fmt: skip
        _KINDS[cls] = kind
    return kind


def _call_ids(message: BaseMessage) -> list[str]:
    if _kind(message) == _AI and message.tool_calls:  # type: ignore[attr-defined]
        return [str(c.get("id")) for c in message.tool_calls]  # type: ignore[attr-defined]
    return []


def _pop_until(msgs: list[BaseMessage], spec: TypeSpec) -> list[BaseMessage]:
    """Drop trailing messages until one of type ``spec`` (LangChain's ``end_on``)."""
    msgs = list(msgs)
    while msgs and not _is(msgs[-1], spec):
        msgs.pop()
    return msgs


_PAIRED = {_AI: True, _TOOL: True}
_TOOL_CALL_ID = attrgetter("tool_call_id")


def _pairing(window: list[BaseMessage], kinds: list[int], stop: int) -> tuple[set[str], list[int]]:
    """In ``window[:stop]``: the calls without a result after them (open), and the indices
    of the results without a call before them (orphans), in one pass over the assistant
    messages and results only."""
    called: set[str] = set()
    answered: set[str] = set()
    orphans: list[int] = []
    for i in compress(range(stop), map(_PAIRED.get, kinds[:stop])):
        m = window[i]
        if kinds[i] == _AI:
            calls = m.tool_calls  # type: ignore[attr-defined]
            if calls:
                called.update([str(c.get("id")) for c in calls])
        else:
            call_id = m.tool_call_id  # type: ignore[attr-defined]
            if call_id in called:
                answered.add(call_id)
            else:
                orphans.append(i)
    return called - answered, orphans


def _without(window: list[BaseMessage], drop: list[int]) -> list[BaseMessage]:
    """``window`` without the messages at the indices ``drop``."""
    if not drop:
        return window
    dropped = set(drop)
    return [m for i, m in enumerate(window) if i not in dropped]


def _safe_prefix(msgs: list[BaseMessage], kinds: list[int], idx: int) -> tuple[int, list[int]]:
    """``idx`` moved back so that no assistant message before it has results at or after
    it, and the orphaned results before that end (to drop)."""
    n = len(msgs)
    while True:
        open_calls, orphans = _pairing(msgs, kinds, idx)
        if not open_calls or idx == n:
            return idx, orphans
        after = compress(range(idx, n), map(_TOOL.__eq__, kinds[idx:]))
        pending = open_calls.intersection(map(_TOOL_CALL_ID, map(msgs.__getitem__, after)))
        if not pending:
            return idx, orphans
        i = end = idx
        while pending and i > 0:  # back to the first assistant message with a cut call
            i -= 1
            if kinds[i] == _AI:
                ids = set(_call_ids(msgs[i]))
                if pending & ids:
                    pending -= ids
                    end = i
        idx = end  # checked again: a call before the new end may be answered after it


def _end_on(msgs: list[BaseMessage], kinds: list[int], spec: TypeSpec, end: int) -> int:
    """The end of ``msgs[:end]`` once trailing messages are dropped until one of type
    ``spec`` (LangChain's ``end_on``), moved back further while a call kept before it
    has a result that went."""
    while True:
        end = len(_pop_until(msgs[:end], spec))
        safe, _ = _safe_prefix(msgs, kinds, end)
        if safe == end:
            return end
        end = safe


def _search(n: int, fits: Callable[[int], bool]) -> int:
    """The largest count of leading items that fits, by LangChain's binary search."""
    left, right = 0, n
    for _ in range(n.bit_length()):
        if left >= right:
            break
        mid = (left + right + 1) // 2
        if fits(mid):
            left = mid
        else:
            right = mid - 1
    return left


def _near(n: int, budget: int, guess: int, count: Callable[[int], int]) -> int:
    """The largest ``k`` in ``[0, n)`` with ``count(k) <= budget`` (``count(n)`` is known to
    be over), for a ``count`` that grows with ``k``, searched from ``guess``: the guess and
    its neighbour confirm it, else a gallop away from it brackets the answer and a binary
    search inside the bracket finds it."""
    lo, hi = 0, n  # count(lo) fits (0 by LangChain's convention), count(hi) is over
    if guess > 0:
        if count(guess) <= budget:
            lo = guess
        else:
            hi = guess
    step = 1
    if lo == guess:  # gallop up from a guess that fits
        while lo + step < hi:
            if count(lo + step) <= budget:
                lo += step
                step *= 2
            else:
                hi = lo + step
                break
    else:  # gallop down from a guess that is over
        while hi - step > lo:
            if count(hi - step) <= budget:
                lo = hi - step
                break
            hi -= step
            step *= 2
    return lo + _search(hi - lo - 1, lambda m: count(lo + m) <= budget)


_CHUNK = 32


def _additive_guess(ordered: list[BaseMessage], budget: int, count: ListCounter) -> int:
    """How many leading messages fit if the counter added up: whole chunks of messages
    while they fit, then halves of the chunk that does not."""
    guess = used = 0
    for start in range(0, len(ordered), _CHUNK):
        chunk = ordered[start : start + _CHUNK]
        size = count(chunk)
        if used + size <= budget:
            used += size
            guess += len(chunk)
            continue
        while len(chunk) > 1:
            half = chunk[: len(chunk) // 2]
            size = count(half)
            if used + size <= budget:
                used += size
                guess += len(half)
                chunk = chunk[len(half) :]
            else:
                chunk = half
        break
    return min(guess, len(ordered) - 1)


class _Trim:
    """One call's counter, budget and partial-message options."""

    def __init__(
        self, token_counter: Any, max_tokens: int, splitter: Splitter, allow_partial: bool
    ) -> None:
        self.count, self.per = counters(token_counter)
        self.max_tokens = max_tokens
        self.splitter = splitter
        self.allow_partial = allow_partial

    def _longest(self, ordered: list[BaseMessage], budget: int) -> int:
        """How many of ``ordered``'s leading messages fit ``budget`` (all of them first).

        The answer LangChain's binary search gives for a counter that grows with the
        list: a per-message counter is summed once per message; a list counter is
        asked about the whole list, then each message alone up to the budget (a guess,
        as if it added up), then the lists around that guess until the answer is
        confirmed, which is two lists when it does add up.
        """
        n = len(ordered)
        if self.per is not None:
            sums = list(accumulate(map(self.per, ordered), initial=0))
            if sums[-1] <= budget:
                return n
            return _search(n, lambda mid: sums[mid] <= budget)
        count = self.count
        if count(ordered) <= budget:
            return n
        return _near(
            n, budget, _additive_guess(ordered, budget, count), lambda mid: count(ordered[:mid])
        )

    def first(
        self, msgs: list[BaseMessage], kinds: list[int], end_on: TypeSpec
    ) -> list[BaseMessage]:
        """``strategy="first"``: the longest prefix that fits, never ending inside an exchange."""
        if not msgs:
            return []
        n = len(msgs)
        idx = self._longest(msgs, self.max_tokens)
        cut, orphans = _safe_prefix(msgs, kinds, idx)
        kept = msgs[:cut]
        part = None
        if self.allow_partial and cut == idx < n and _splittable(msgs[idx]):
            part = self._partial(kept, msgs[idx], self.max_tokens, "first")
        if end_on and not (part is not None and _is(part, end_on)):
            part = None
            cut = _end_on(msgs, kinds, end_on, cut)  # only trailing messages go
            kept = msgs[:cut]
        kept = _without(kept, [i for i in orphans if i < cut])  # orphans stay orphans
        if part is not None:
            kept.append(part)  # neither a call nor a result: the pairing is unchanged
        return kept

    def last(
        self,
        msgs: list[BaseMessage],
        kinds: list[int],
        *,
        end_on: TypeSpec,
        start_on: TypeSpec,
        include_system: bool,
    ) -> list[BaseMessage]:
        """``strategy="last"``: the longest suffix that fits, whole exchanges, latest turn
        kept. ``end_on`` ends where LangChain's does unless a call kept before that end
        lost its result to it; then it ends before that call."""
        if not msgs:
            return []
        if not end_on:
            return self._suffix(msgs, kinds, start_on, include_system)[0]
        end = len(_pop_until(msgs, end_on))
        kept, first = self._suffix(msgs[:end], kinds[:end], start_on, include_system)
        cut = {m.tool_call_id for m in msgs[end:] if _kind(m) == _TOOL}  # type: ignore[attr-defined]
        if cut and cut & _pairing(msgs[first:end], kinds[first:end], end - first)[0]:
            end = _end_on(msgs, kinds, end_on, end)
            kept = self._suffix(msgs[:end], kinds[:end], start_on, include_system)[0]
        return kept

    def _suffix(
        self, msgs: list[BaseMessage], kinds: list[int], start_on: TypeSpec, include_system: bool
    ) -> tuple[list[BaseMessage], int]:
        """:meth:`last` after ``end_on``, and where in ``msgs`` the kept messages after
        the system message start."""
        if not msgs:
            return [], 0
        system: list[BaseMessage] = []
        if include_system and isinstance(msgs[0], SystemMessage):
            system, msgs, kinds = msgs[:1], msgs[1:], kinds[1:]
        offset = len(system)
        budget = self.max_tokens
        if system:
            budget = max(0, budget - self.count(system))
        n = len(msgs)
        latest = n - 1 - kinds[::-1].index(_HUMAN) if _HUMAN in kinds else None
        reverse = msgs[::-1]
        idx = self._longest(reverse, budget)
        start = n - idx
        window, window_kinds = msgs[start:], kinds[start:]
        if self.allow_partial and start > 0 and _splittable(msgs[start - 1]):
            part = self._partial(reverse[:idx], msgs[start - 1], budget, "last")
            if part is not None:
                window.insert(0, part)
                window_kinds.insert(0, _kind(part))
                start -= 1
        if latest is not None and start > latest:
            return self._latest_turn(system, msgs[latest:]), offset + latest
        if start_on:
            drop = 0
            while drop < len(window) and start + drop != latest:
                if _is(window[drop], start_on):
                    break
                drop += 1
            window, window_kinds = window[drop:], window_kinds[drop:]
            start += drop
        kept = _without(window, _pairing(window, window_kinds, len(window))[1])
        return system + kept, offset + start

    def _latest_turn(self, system: list[BaseMessage], turn: list[BaseMessage]) -> list[BaseMessage]:
        """The latest human turn alone is over: shorten its outputs, never drop it."""
        items, kinds = _messages(
            fit_items([*system, *turn], Adapter(), self.count, self.max_tokens).items
        )
        return _without(items, _pairing(items, kinds, len(items))[1])

    def _partial(
        self,
        kept: list[BaseMessage],
        message: BaseMessage,
        budget: int,
        strategy: Literal["first", "last"],
    ) -> BaseMessage | None:
        """As much of ``message`` as fits beside ``kept`` (LangChain's ``allow_partial``):
        whole content blocks first, then pieces of its text by ``text_splitter``."""
        count = self.count
        excluded = message.model_copy(deep=True)
        if isinstance(excluded.content, list):
            blocks = list(excluded.content)
            if strategy == "last":
                blocks.reverse()
            for keep in range(len(blocks) - 1, 0, -1):
                excluded.content = blocks[:keep]
                if count([*kept, excluded]) <= budget:
                    if strategy == "last":
                        excluded.content = blocks[:keep][::-1]
                    return excluded
            excluded.content = blocks[:1]
        text = _first_text(excluded.content)
        if not text:
            return None
        pieces = self.splitter(text)
        if strategy == "last":
            pieces = pieces[::-1]
        base = count(kept)

        def fits(mid: int) -> bool:
            excluded.content = "".join(pieces[:mid])
            return base + count([excluded]) <= budget

        left = _search(len(pieces), fits)
        if left == 0:
            return None
        chosen = pieces[:left]
        if strategy == "last":
            chosen = chosen[::-1]
        excluded.content = "".join(chosen)
        return excluded


def _first_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    for block in content or ():
        if isinstance(block, str):
            return block
        if isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            return text if isinstance(text, str) else None
    return None


def _splittable(message: BaseMessage) -> bool:
    """A message that may be kept in part: not half of an exchange."""
    return _kind(message) != _TOOL and not _call_ids(message)
