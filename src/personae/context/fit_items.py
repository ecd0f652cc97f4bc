"""Fit a framework's message list to a token budget with personae's exchange rules.

One core for every integration. A framework message is seen through an
:class:`Adapter` as one or more :class:`~personae.context.ChatMessage` parts
(a pydantic-ai request can hold several tool results); personae's
:func:`~personae.context.messages.group_units` makes whole exchanges of them
(an assistant message with tool calls together with all of its results, never
one without the other), and the fit then:

- keeps the leading system messages (or system parts) when asked (``keep_system``);
- always keeps the latest user turn (the last user message and everything after it);
- evicts the oldest exchanges first, whole, and starts what it keeps on a user
  message (after the system part): an assistant reply whose question was evicted
  goes with it; the newest evicted one comes back
  shortened (its tool results, then assistant texts, cut with a notice) when that
  fits the room its eviction left;
- when the latest turn alone is over the budget, shortens its tool results (then
  its assistant texts) with a visible notice, all to one level found with the
  caller's own ``count``, then leaves out middle steps of the turn; the user
  message is never cut, and a shortened text is always smaller than the original;
- measures with the caller's own ``count`` over the exact list it returns, so
  ``count(result) <= budget`` whenever ``fits`` is true.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Generic, Protocol, TypeVar

from personae.context._textcut import cut_text
from personae.context.messages import ChatMessage, Unit, group_units, latest_turn_start
from personae.tokens import TokenCounter, exact_counter

__all__ = ["Adapter", "Fitted", "fit_items"]

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)

_NOTICE = "[output shortened to fit the budget: {n:,} characters in full]"
_STRIDE = 1 << 16  # part index space per item (seq = item * _STRIDE + part)


class Adapter(Protocol[T]):
    """How the fit sees and rebuilds one framework message."""

    def parts(self, item: T) -> list[ChatMessage]:
        """The item as personae messages (role, content, tool calls, tool call id)."""
        ...

    def rebuild(self, item: T, keep: list[int], texts: dict[int, str]) -> T | None:
        """The item with only the parts ``keep`` (indices into :meth:`parts`), part
        contents replaced by ``texts``; ``None`` when nothing of it is left."""
        ...


@dataclass(frozen=True)
class Fitted(Generic[T]):
    """The result of :func:`fit_items`."""

    items: list[T]
    """The kept items, in their order (shortened ones rebuilt)."""
    tokens: int
    """``count(items)``: the caller's own measure of the result."""
    budget: int
    """The budget asked for."""
    dropped: int
    """Items left out (evicted, or unpaired tool calls/results)."""
    shrunk: int
    """Parts whose content was shortened (in the latest turn, or in the oldest exchange
    kept when it did not fit whole)."""
    fits: bool
    """False only when even the smallest form (system, user message, notices) is over."""


def fit_items(
    items: Sequence[T],
    adapter: Adapter[T],
    count: Callable[[list[T]], int],
    budget: int,
    *,
    keep_system: bool = True,
    text_counter: TokenCounter | None = None,
) -> Fitted[T]:
    """Fit ``items`` into ``budget`` as measured by ``count`` (see the module docstring).

    ``text_counter`` measures text while shortening tool outputs (default:
    personae's exact ``o200k_base``); the final check always uses ``count``
    (a count that returns more than ``budget`` for a list that breaks some other
    limit, such as a number of items, makes the fit honour that limit too).
    """
    texts = text_counter or exact_counter()
    parts: list[ChatMessage] = []
    pinned: list[int] = []  # seqs of the leading system parts
    for i, item in enumerate(items):
        for j, m in enumerate(adapter.parts(item)):
            seq = i * _STRIDE + j
            if keep_system and m.role == "system" and len(pinned) == len(parts):
                pinned.append(seq)
            parts.append(replace(m, seq=seq))
    units, _ = group_units(parts[len(pinned) :])
    last = latest_turn_start(units)
    selection = _Selection(items, adapter, pinned, units)

    def measure(start: int, turn: list[Unit]) -> tuple[list[T], int]:
        built = selection.build([*units[start:last], *turn])
        return built, count(built)

    turn = list(units[last:])
    # Oldest first out, whole exchanges; the count is additive enough that one
    # pass from the end finds the start, then the exact list count confirms it.
    start = last
    unit_costs = [count(selection.build_one(u)) for u in units[:last]]
    built, used = measure(last, turn)
    room = budget - used
    while start > 0 and unit_costs[start - 1] <= room:
        room -= unit_costs[start - 1]
        start -= 1

    def on_user(k: int) -> int:  # the kept history starts on a user message, never mid-turn
        while k < last and units[k].head.role != "user":
            k += 1
        return k

    start = on_user(start)
    built, used = measure(start, turn)
    while used > budget and start < last:
        start = on_user(start + 1)
        built, used = measure(start, turn)
    shrunk = 0
    if used > budget:
        turn, shrunk = _shrink(turn, lambda t: measure(last, t)[1], budget, texts)
        built, used = measure(last, turn)
    elif 0 < start <= last and used < budget and (prev := _turn_before(units, start)) < start:
        # The turn before the kept ones did not fit whole: shortened (its user message
        # whole, so the history still starts on one), it takes the room its eviction
        # left (when its smallest form fits).
        kept = [*units[start:last], *turn]

        def with_older(older: list[Unit]) -> int:
            return count(selection.build([*older, *kept]))

        older, cut = _shrink(list(units[prev:start]), with_older, budget, texts)
        if cut:
            trial = selection.build([*older, *kept])
            trial_used = count(trial)
            if trial_used <= budget:
                built, used, shrunk = trial, trial_used, cut
    return Fitted(
        items=built,
        tokens=used,
        budget=budget,
        dropped=len(items) - len(built),
        shrunk=shrunk,
        fits=used <= budget,
    )


def _turn_before(units: Sequence[Unit], start: int) -> int:
    """Index of the user unit that opens the turn before ``start`` (``start`` if none)."""
    for k in range(start - 1, -1, -1):
        if units[k].head.role == "user":
            return k
    return start


class _Selection(Generic[T]):
    """Turns kept units back into framework items (pinned system items first)."""

    def __init__(
        self, items: Sequence[T], adapter: Adapter[T], pinned: list[int], units: Sequence[Unit]
    ) -> None:
        self.items = items
        self.adapter = adapter
        self.pinned = pinned
        self.originals = {m.seq: m.content for u in units for m in u.messages}
        self.sizes = {i: len(adapter.parts(item)) for i, item in enumerate(items)}

    def build_one(self, unit: Unit) -> list[T]:
        return self._rebuild([unit], with_pinned=False)

    def build(self, units: Sequence[Unit]) -> list[T]:
        return self._rebuild(units, with_pinned=True)

    def _rebuild(self, units: Sequence[Unit], *, with_pinned: bool) -> list[T]:
        keep: dict[int, list[int]] = {}
        changed: dict[int, dict[int, str]] = {}
        for seq in self.pinned if with_pinned else ():
            i, j = divmod(seq, _STRIDE)
            keep.setdefault(i, []).append(j)
        for unit in units:
            for m in unit.messages:
                i, j = divmod(m.seq, _STRIDE)
                keep.setdefault(i, []).append(j)
                if m.content != self.originals.get(m.seq, m.content):
                    changed.setdefault(i, {})[j] = m.content
        out: list[T] = []
        for i in sorted(keep):
            whole = self.sizes[i] == len(keep[i])
            if whole and i not in changed:
                out.append(self.items[i])
                continue
            rebuilt = self.adapter.rebuild(self.items[i], sorted(keep[i]), changed.get(i, {}))
            if rebuilt is not None:
                out.append(rebuilt)
        return out


def _shrink(
    turn: list[Unit], measure: Callable[[list[Unit]], int], budget: int, texts: TokenCounter
) -> tuple[list[Unit], int]:
    """Shorten the latest turn's tool results, then assistant texts, then drop middle steps.

    Every output longer than a common level is cut to that level (with a notice);
    the level is the largest whose result ``measure`` puts within ``budget``
    (a bisection over the caller's own measure, so its counting decides). A
    shortened output is always smaller than the original: an output the notice
    would not shorten stays as it is.
    """
    for roles in (("tool",), ("tool", "assistant")):
        pool = [
            (texts.count(m.content), k, j)
            for k, u in enumerate(turn)
            for j, m in enumerate(u.messages)
            if m.role in roles and m.content
        ]
        if not pool:
            continue
        at_level = _Levels(turn, pool, texts)
        if measure(at_level(0)[0]) > budget:
            continue
        lo, hi = 0, max(size for size, _, _ in pool)
        while hi - lo > 1:  # largest level within the budget (the result grows with it)
            mid = (lo + hi) // 2
            if measure(at_level(mid)[0]) <= budget:
                lo = mid
            else:
                hi = mid
        return at_level(lo)
    pool = [
        (texts.count(m.content), k, j)
        for k, u in enumerate(turn)
        for j, m in enumerate(u.messages)
        if m.role in ("tool", "assistant") and m.content
    ]
    turn, shrunk = _Levels(turn, pool, texts)(0)
    while len(turn) > 2 and measure(turn) > budget:
        del turn[1]
    return turn, shrunk


class _Levels:
    """The latest turn with every output of ``pool`` cut to at most ``level`` tokens."""

    def __init__(self, turn: list[Unit], pool: list[tuple[int, int, int]], texts: TokenCounter):
        self.turn, self.pool, self.texts = turn, pool, texts
        self.cuts: dict[tuple[int, int, int], str | None] = {}

    def __call__(self, level: int) -> tuple[list[Unit], int]:
        turn, shrunk = self.turn, 0
        for size, k, j in self.pool:
            if size <= level:
                continue
            content = self._cut(size, k, j, level)
            if content is not None:
                turn = _with(turn, k, j, content)
                shrunk += 1
        return turn, shrunk

    def _cut(self, size: int, k: int, j: int, level: int) -> str | None:
        key = (k, j, level)
        if key not in self.cuts:
            original = self.turn[k].messages[j].content
            notice = _NOTICE.format(n=len(original))
            cut = cut_text(original, level, self.texts, notice, total=size) if level else None
            text = cut.text if cut is not None else notice
            # Never longer than what it replaces (a short output keeps its text).
            self.cuts[key] = text if self.texts.count(text) < size else None
        return self.cuts[key]


def _with(turn: list[Unit], k: int, j: int, content: str) -> list[Unit]:
    msgs = list(turn[k].messages)
    msgs[j] = replace(msgs[j], content=content, tokens=None)
    out = list(turn)
    out[k] = Unit(tuple(msgs))
    return out
