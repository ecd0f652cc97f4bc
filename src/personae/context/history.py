"""Conversation trimming that keeps whole exchanges.

- An assistant message with tool calls is kept or dropped with all of its results.
- The latest user turn (the last user message and everything after it) is always
  kept; when it alone is too big its tool outputs (then assistant texts) shrink
  with a visible notice. Only when even that is not enough are whole middle
  steps of the turn elided (with a notice); the user message and the last step stay.
- Older exchanges are evicted in batches anchored on a fixed grid of message
  positions (hysteresis), so the kept prefix stays byte-stable for several turns
  and provider prompt caches keep hitting.
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import NamedTuple

from personae.context._counted import count_later
from personae.context._lru import IdentityMemo, SizedMemo, hold
from personae.context._textcut import (
    count_around,
    count_cuttable,
    count_small,
    count_text_around,
    recall_counts,
)
from personae.context._turnshrink import CUTS, Cuts, call_lines, header_line, shrink_turn
from personae.context.messages import (
    CUT_ORIGIN_EVERY,
    ChatMessage,
    Unit,
    latest_turn_start,
)
from personae.context.render import escape
from personae.tokens.base import TokenCounter

__all__ = [
    "Exchanges",
    "HistoryFit",
    "MessageCosts",
    "fit_history",
    "render_message",
    "render_unit",
]

_SEP = "\n\n"
_MESSAGES = operator.attrgetter("messages")
_MAX_NOTICES = 4096
_MAX_GRID_FITS = 256
"""Grid fits kept per conversation (a few grid points per grid step are met)."""


def render_message(msg: ChatMessage) -> str:
    """One message as Markdown (header line, content, tool call lines)."""
    return f"{header_line(msg)}{msg.content}{call_lines(msg)}"


_PREPARED: SizedMemo[tuple[str, frozenset[str], ChatMessage], tuple[ChatMessage, int]] = SizedMemo(
    32 << 20
)
"""Messages prepared (escaped and counted) in this process, least recently used dropped
past 32 M characters of content."""
_RENDERED: SizedMemo[tuple[ChatMessage, ...], str] = SizedMemo(32 << 20)
"""Exchanges rendered in this process, by their (prepared) messages, up to 32 M characters."""


_RECALL_FROM = 16
"""Messages prepared at once from which their counts are looked up on disk together."""


class MessageCosts:
    """Token cost of each rendered message, counted once (stored counts reused)."""

    def __init__(self, counter: TokenCounter, tags: frozenset[str]) -> None:
        self.counter = counter
        self.tags = tags
        self.sep = count_small(counter, _SEP)

    def prepare(self, msg: ChatMessage) -> tuple[ChatMessage, int]:
        """The escaped message and its rendered cost (remembered by content in the
        process: a fresh snapshot of a conversation seen before escapes and counts
        nothing again)."""
        key = (self.counter.name, self.tags, msg)
        got = _PREPARED.get(key)
        if got is None:
            got = self._prepare(msg)
            # the escaped copy shares the original's text unless escaping changed it
            size = len(msg.content) * (1 if got[0].content is msg.content else 2)
            _PREPARED.put(key, got, size + 64)
        return got

    def prepare_many(self, msgs: Sequence[ChatMessage]) -> list[tuple[ChatMessage, int]]:
        """:meth:`prepare` each message; for many, the counts of those not prepared in
        this process are first looked up on disk in one go (what an earlier process
        counted, see ``_diskcounts``)."""
        if len(msgs) >= _RECALL_FROM:
            name, tags = self.counter.name, self.tags
            todo = [m for m in msgs if _PREPARED.get((name, tags, m)) is None]
            recall_counts(
                self.counter,
                itertools.chain(
                    (escape(m.content, tags) for m in todo),
                    (call_lines(m) for m in todo if m.tool_calls),
                ),
            )
        return list(map(self.prepare, msgs))

    def _prepare(self, msg: ChatMessage) -> tuple[ChatMessage, int]:
        content = escape(msg.content, self.tags)
        calls = tuple(replace(c, arguments=escape(c.arguments, self.tags)) for c in msg.tool_calls)
        if content is not msg.content or any(
            a.arguments is not b.arguments for a, b in zip(calls, msg.tool_calls, strict=True)
        ):
            msg = replace(msg, content=content, tool_calls=calls, tokens=None)
        if msg.tokens is not None and msg.counter == self.counter.name:
            body = msg.tokens
        else:
            body = count_cuttable(self.counter, msg.content) if msg.content else 0
        extra = call_lines(msg)
        cost = count_small(self.counter, header_line(msg)) + body
        if extra:
            cost += count_small(self.counter, extra)
        return msg, cost


class HistoryFit(NamedTuple):
    """The kept part of a conversation (a named tuple: one is built per fitting)."""

    messages: tuple[ChatMessage, ...]
    """Kept messages (latest-turn contents possibly shortened)."""
    tokens: int
    """Estimated tokens of ``text`` (sum of counted pieces)."""
    omitted: int
    """Messages not shown (evicted, never fetched, or unpaired)."""
    shrunk: int
    """Latest-turn messages whose content was shortened."""
    fits: bool
    """False when even the smallest form is over the limit (then this is that smallest form)."""
    blocks: tuple[str, ...] = ()
    """The pieces ``text`` joins with blank lines (notice line, then each exchange)."""

    @property
    def text(self) -> str:
        """Rendered section content (notice line first when anything was omitted); joined
        on demand: the fitter tries several forms and renders only the one it keeps."""
        return _SEP.join(self.blocks)


def _notice(template: str, omitted_msgs: int, omitted_tokens: int) -> str:
    return template.format(
        omitted=omitted_tokens, messages=omitted_msgs, total=omitted_tokens, kept=0, tag="messages"
    )


def _notice_cost(
    ex: Exchanges, counter: TokenCounter, template: str, omitted_msgs: int, omitted_tokens: int
) -> int:
    """Tokens of the eviction notice and the blank line after it (0: nothing omitted)."""
    if omitted_msgs == 0:
        return 0
    key = (counter.name, template, omitted_msgs, omitted_tokens)
    got = ex.notices.get(key)
    if got is None:
        cost = count_small(counter, _notice(template, omitted_msgs, omitted_tokens)) + ex.sep
        got = hold(ex.notices, key, cost, _MAX_NOTICES)  # a conversation's budgets share few
    return got


def render_unit(unit: Unit) -> str:
    """One exchange as Markdown: its messages separated by a blank line (remembered by
    its messages in the process)."""
    got = _RENDERED.get(unit.messages)
    if got is None:
        got = _SEP.join([render_message(m) for m in unit.messages])
        _RENDERED.put(unit.messages, got, len(got) + 64)
    return got


_CUT_BLOCKS: IdentityMemo[Unit, str] = IdentityMemo(256)
"""Cut exchanges rendered, for the grid cuts met again."""


def _render_cut(unit: Unit, counter: TokenCounter, made: Cuts | None = None) -> str:
    """An exchange that may hold outputs cut here, rendered. A cut exchange is new text
    (not remembered: another budget cuts elsewhere); the exact verification counts it
    from its messages (a blank line before a header always starts a new piece, so their
    counts add up): each cut output from its offsets (:func:`count_around`), each other
    message by content (counted once). ``made``: the cuts of a latest turn shrunk for
    this fitting only (by message object id), which nothing else meets again: its
    rendering is not remembered either."""
    if made is None:
        held = _CUT_BLOCKS.get(unit)
        if held is not None:
            return held  # a grid cut met before (the same cut exchange object)
    msgs = unit.messages
    cuts = [CUTS.get(m) for m in msgs] if made is None else [made.get(id(m)) for m in msgs]
    if all(c is None for c in cuts):
        return render_unit(unit)
    rendered = [
        render_message(m) if c is not None else _whole(m) for m, c in zip(msgs, cuts, strict=True)
    ]
    block = _SEP.join(rendered)
    if made is None:
        _CUT_BLOCKS.put(unit, block)

    def count(after: str) -> int | None:
        total = 0
        last = len(msgs) - 1
        for j, (m, cut) in enumerate(zip(msgs, cuts, strict=True)):
            if cut is not None:
                tail = _SEP if j < last else after
                n = count_around(counter, header_line(m), cut, call_lines(m) + tail)
                if n is None:
                    return None
            else:
                n = _whole_count(counter, m, rendered[j], _SEP if j < last else after)
            total += n
        return total

    count_later(counter, block, count)
    return block


_WHOLE: IdentityMemo[ChatMessage, tuple[str, str, int]] = IdentityMemo(1024)
"""Messages left whole in exchanges cut lately, by the message: rendered, with the
counter's name and the count followed by a blank line (a latest turn is cut again at
every budget below its size; its other messages are the same objects each time)."""


def _whole(msg: ChatMessage) -> str:
    """``msg`` rendered (:func:`render_message`), remembered by the message."""
    held = _WHOLE.get(msg)
    return held[0] if held is not None else render_message(msg)


def _whole_count(counter: TokenCounter, msg: ChatMessage, rendered: str, tail: str) -> int:
    """Exact count of ``rendered + tail`` (``rendered``: ``msg`` left whole in a cut
    exchange), from the content's count and last pieces when known (see
    :func:`count_text_around`); remembered by the message when ``tail`` is a blank line."""
    if tail == _SEP:
        held = _WHOLE.get(msg)
        if held is not None and held[1] == counter.name:
            return held[2]
    n = count_text_around(counter, header_line(msg), msg.content, call_lines(msg) + tail)
    if n is None:
        n = count_small(counter, rendered + tail)
    if tail == _SEP:
        _WHOLE.put(msg, (rendered, counter.name, n))
    return n


@dataclass(frozen=True)
class Exchanges:
    """A conversation prepared for fitting: exchanges, their costs, running totals and
    rendered text, computed once (a session's window extends them turn after turn)."""

    units: tuple[Unit, ...]
    """Whole exchanges, oldest first."""
    costs: tuple[tuple[int, ...], ...]
    """``costs[k][j]``: rendered cost of message ``j`` of unit ``k``."""
    cum_cost: Sequence[int]
    """Rendered cost (separators included) of the units before each index (one more
    entry than units)."""
    cum_msgs: Sequence[int]
    """Messages in the units before each index (one more entry than units)."""
    blocks: Sequence[str]
    """Each unit rendered (:func:`render_unit`)."""
    sep: int
    """Tokens of the blank line between two messages."""
    heads: Sequence[int] = ()
    """Seq of each unit's first message (filled from ``units`` when empty)."""
    notices: dict[tuple[str, str, int, int], int] = field(
        default_factory=dict, compare=False, repr=False
    )
    """Cost of each eviction notice met with these exchanges, per counter (a notice
    depends on where the kept part starts, so budgets share a few)."""
    on_grid: dict[tuple[str, str, int, int, int, int], tuple[Unit, HistoryFit]] = field(
        default_factory=dict, compare=False, repr=False
    )
    """The fits that start on a cut grid point, by what decides them (see
    :func:`fit_history`; with the cut exchange, kept alive so its id is not reused):
    limits that share a grid point share the fit."""

    def __post_init__(self) -> None:
        if len(self.heads) != len(self.units):
            object.__setattr__(self, "heads", [u.head.seq for u in self.units])

    @classmethod
    def of(cls, units: Sequence[Unit], costs: Sequence[Sequence[int]], sep: int) -> Exchanges:
        """Totals and rendered blocks computed from scratch."""
        cum_cost = list(itertools.accumulate((sum(c) + sep * len(c) for c in costs), initial=0))
        cum_msgs = list(itertools.accumulate((len(u.messages) for u in units), initial=0))
        blocks = [render_unit(u) for u in units]
        return cls(tuple(units), tuple(map(tuple, costs)), cum_cost, cum_msgs, blocks, sep)

    @cached_property
    def latest(self) -> int:
        """Index of the latest turn's first exchange (every form keeps the turn)."""
        return latest_turn_start(self.units)

    @cached_property
    def turn_tokens(self) -> int:
        """Tokens of the latest turn, which every form of the conversation shows."""
        return self.cum_cost[-1] - self.cum_cost[self.latest] - self.sep

    @cached_property
    def flat(self) -> tuple[ChatMessage, ...]:
        """Every message of the exchanges, oldest first (``cum_msgs`` indexes it)."""
        return tuple(itertools.chain.from_iterable(map(_MESSAGES, self.units)))

    @property
    def tokens(self) -> int:
        """Rendered cost of the whole conversation (separators between messages only)."""
        return self.cum_cost[-1] - self.sep * min(1, self.cum_msgs[-1])


def fit_history(
    ex: Exchanges,
    counter: TokenCounter,
    *,
    limit: int,
    max_messages: int | None,
    earlier: int,
    notice: str,
    batch: int,
    keep_from: int | None = None,
    low_water: float = 1.0,
    cut_step: float = 0.0,
) -> HistoryFit:
    """Choose which exchanges to keep within ``limit`` tokens and ``max_messages``.

    ``earlier`` counts messages before ``ex.units`` that are not shown at all.
    ``keep_from`` (hysteresis): the seq of the first message the previous prompt
    of this conversation kept. While the exchanges from there still fit, they are
    kept as they were (the prompt's prefix stays byte-identical); once they do
    not, older exchanges are evicted in one batch until what is kept takes at
    most ``low_water`` of ``limit``.

    ``cut_step`` (no previous prompt): the conversation starts at a point on a grid
    of token positions counted from its start, one every ``cut_step * limit``
    tokens rounded down to a fixed ladder of sizes (:func:`_grid_step`): the first
    point at or after the earliest position that fits. The exchange the point
    falls in is shown with its outputs shortened to fit the part after the point
    (whole from the next exchange when it cannot shorten). The cut depends only on
    the exchanges before it and ``limit``, so a longer history keeps the same start
    until it passes the next point (and limits a few percent apart often share
    it). 0: the earliest exchange that fits, the one before it shortened to fill
    the room.
    """
    units, cum_cost, cum_msgs, sep = ex.units, ex.cum_cost, ex.cum_msgs, ex.sep
    n = len(units)
    last = ex.latest
    # Suffix sums over the evictable part [0, last]: cost of units k..last-1.
    before_cost, before_msgs = cum_cost[last], cum_msgs[last]

    def suffix_cost(k: int) -> int:
        return before_cost - cum_cost[k]

    turn_cost = cum_cost[n] - before_cost

    def notice_cost(evicted_msgs: int, evicted_tokens: int) -> int:
        return _notice_cost(ex, counter, notice, evicted_msgs + earlier, evicted_tokens)

    msg_room = None if max_messages is None else max(0, max_messages - cum_msgs[n] + before_msgs)
    # Smallest start s in [0, last] whose suffix fits; suffix sums are monotone, so bisect.
    s_min = _start_within(
        ex, last, limit - turn_cost - notice_cost(max(1, before_msgs), suffix_cost(0))
    )
    if msg_room is not None:
        s_min = max(s_min, bisect.bisect_left(cum_msgs, before_msgs - msg_room, 0, last + 1))
    hinted = _unit_at(ex.heads, keep_from, last) if keep_from is not None else None
    start, grid = _choose_start(
        ex, counter, (s_min, last, hinted), (limit, max_messages), (low_water, cut_step, batch),
        notice_cost,
    )  # fmt: skip
    if grid is not None:
        return _on_grid(ex, counter, (notice, earlier), start, grid)
    head: Sequence[Unit] = ()  # kept exchanges shortened, before the ones kept whole
    whole_from = start  # the first of the exchanges kept whole to the end
    blocks = list(ex.blocks[start:])
    evicted_msgs, evicted_tokens = cum_msgs[min(start, last)], cum_cost[start]
    body_cost = suffix_cost(start) + turn_cost
    shrunk, fits = 0, True
    head_cost = notice_cost(evicted_msgs, evicted_tokens)
    if (
        hinted is None
        and cut_step <= 0
        and start == s_min
        and 0 < start <= last
        and body_cost + head_cost < limit
    ):
        # The exchange just before the kept ones did not fit whole: shortened, it
        # takes the room its eviction left (no cut point is kept for stability here).
        part = _partial(ex, start - 1, counter, (msg_room, limit - body_cost), notice_cost)
        if part is not None:
            start -= 1
            head = (part[0],)
            blocks.insert(0, _render_cut(part[0], counter))
            evicted_msgs, evicted_tokens = cum_msgs[start], cum_cost[start]
            body_cost += part[1]
            head_cost = notice_cost(evicted_msgs, evicted_tokens)
    if body_cost + head_cost > limit and n:
        # Only the latest turn can stay and it is too big: shrink its contents.
        evicted_msgs, evicted_tokens = before_msgs, suffix_cost(0)
        head_cost = notice_cost(evicted_msgs, evicted_tokens)
        made: Cuts = {}
        turn, kept_costs, shrunk, fits, elided = shrink_turn(
            list(units[last:]), [list(c) for c in ex.costs[last:]], counter, limit - head_cost, sep,
            made,
        )  # fmt: skip
        head, whole_from = turn, n
        blocks = _turn_blocks(ex, last, turn, counter, made, aligned=not elided)
        evicted_msgs += elided
        head_cost = notice_cost(evicted_msgs, evicted_tokens)
        body_cost = sum(sum(c) + sep * len(c) for c in kept_costs)
        fits = fits and body_cost + head_cost <= limit
    return _shown(
        ex, (head, whole_from, blocks), (notice, evicted_msgs + earlier, evicted_tokens),
        (body_cost + head_cost - sep, shrunk, fits),
    )  # fmt: skip


def _shown(
    ex: Exchanges,
    kept: tuple[Sequence[Unit], int, list[str]],
    notice: tuple[str, int, int],
    sizes: tuple[int, int, bool],
) -> HistoryFit:
    """The fit that shows ``kept`` (the exchanges shortened, the first of those kept
    whole to the end, and the blocks of all of them) after the notice ``notice`` says
    (its template, the messages not shown, their tokens); ``sizes``: its tokens, the
    latest-turn messages shrunk, and whether it fits."""
    head, whole_from, blocks = kept
    template, omitted, evicted_tokens = notice
    msgs = ex.flat[ex.cum_msgs[whole_from] :]
    if head:
        msgs = (*itertools.chain.from_iterable(map(_MESSAGES, head)), *msgs)
    if omitted:
        blocks.insert(0, _notice(template, omitted, evicted_tokens))
    tokens, shrunk, fits = sizes
    return HistoryFit(msgs, tokens, omitted, shrunk, fits, tuple(blocks))


def _on_grid(
    ex: Exchanges,
    counter: TokenCounter,
    notice: tuple[str, int],
    start: int,
    grid: tuple[Unit, int],
) -> HistoryFit:
    """The fit that starts on a grid point inside exchange ``start``, shown as ``grid``
    (the exchange cut, its cost) and followed by every later exchange whole
    (``notice``: the template and the messages not shown before the exchanges). Such a
    start fits whole (:func:`_grid_start` checks it): the fit depends on the start, the
    cut and the notice, not on the limit, so limits that share the grid point share
    it (kept with the exchanges, see :attr:`Exchanges.on_grid`)."""
    template, earlier = notice
    key = (counter.name, template, earlier, start, id(grid[0]), grid[1])
    held = ex.on_grid.get(key)
    if held is not None and held[0] is grid[0]:
        return held[1]
    cum_cost = ex.cum_cost
    omitted, evicted_tokens = ex.cum_msgs[start] + earlier, cum_cost[start]
    tokens = (
        cum_cost[-1] - cum_cost[start + 1] + grid[1] - ex.sep
        + _notice_cost(ex, counter, template, omitted, evicted_tokens)
    )  # fmt: skip
    blocks = [_render_cut(grid[0], counter), *ex.blocks[start + 1 :]]
    got = _shown(
        ex, ((grid[0],), start + 1, blocks), (template, omitted, evicted_tokens), (tokens, 0, True)
    )
    hold(ex.on_grid, key, (grid[0], got), _MAX_GRID_FITS)
    return got


def _turn_blocks(
    ex: Exchanges,
    last: int,
    turn: Sequence[Unit],
    counter: TokenCounter,
    made: Cuts,
    *,
    aligned: bool,
) -> list[str]:
    """The latest turn's exchanges rendered, shrunk ones anew (``made``: their cuts;
    ``aligned``: ``turn`` has an exchange for each of ``ex.units[last:]``, the ones left
    whole the same objects, whose rendered blocks ``ex`` holds)."""
    if not aligned:
        return [_render_cut(u, counter, made) for u in turn]
    units, held = ex.units, ex.blocks
    return [
        held[last + i] if u is units[last + i] else _render_cut(u, counter, made)
        for i, u in enumerate(turn)
    ]


def _choose_start(  # noqa: PLR0917  # private, called once
    ex: Exchanges,
    counter: TokenCounter,
    at: tuple[int, int, int | None],
    limits: tuple[int, int | None],
    grids: tuple[float, float, int],
    notice_cost: Callable[[int, int], int],
) -> tuple[int, tuple[Unit, int] | None]:
    """The first exchange kept (see :func:`fit_history`) and, on the cut grid, that
    exchange shortened (``at``: ``s_min``, the latest turn's first exchange, the
    hinted start; ``limits``: tokens, messages; ``grids``: ``low_water``,
    ``cut_step``, ``batch``)."""
    (s_min, last, hinted), limit, (low_water, cut_step, batch) = at, limits[0], grids
    cum_cost, cum_msgs = ex.cum_cost, ex.cum_msgs
    if _turn_alone_over(ex, limit, notice_cost):
        return last, None  # shrunk, whatever comes before: no start to choose
    if s_min == 0 and cum_cost[-1] + notice_cost(0, 0) <= limit:
        return 0, None
    if hinted is not None and hinted >= s_min:
        return hinted, None  # the previous prompt's exchanges still fit: keep its prefix
    if hinted is not None and low_water < 1:
        # Overflow: evict a batch, down to the low-water mark (``needed``: everything
        # from the earliest exchange on, and the largest notice that can come).
        needed = cum_cost[-1] + notice_cost(max(1, cum_msgs[last]), cum_cost[last])
        low = int(limit * low_water) - needed + cum_cost[last]
        return max(_anchor(ex.heads, s_min, last, batch), _start_within(ex, last, low)), None
    if cut_step > 0:
        step = _grid_step(limit * cut_step)
        start, grid = _grid_start(ex, counter, (s_min, last), step, limits, notice_cost)
        if start >= 0:
            return start, grid
    return _anchor(ex.heads, s_min, last, batch), None  # when the message count binds


def _turn_alone_over(ex: Exchanges, limit: int, notice_cost: Callable[[int, int], int]) -> bool:
    """The latest turn, with the notice for everything before it, is over ``limit``: the
    fit shrinks the turn whatever start is chosen (a shortcut past choosing one)."""
    cum_cost, cum_msgs, last = ex.cum_cost, ex.cum_msgs, ex.latest
    return cum_cost[-1] - cum_cost[last] + notice_cost(cum_msgs[last], cum_cost[last]) > limit


_GRID_STEPS = sorted({math.isqrt(math.isqrt(1 << i)) for i in range(200)})
"""The sizes a cut grid's step takes: 2 ** (i / 4) tokens rounded down (integer roots, so
the same on every platform), about 19% apart."""


def _grid_step(size: float) -> int:
    """A cut grid's step for ``size`` (``cut_step`` of the room): the largest of
    :data:`_GRID_STEPS` at most ``size``. Rooms a few percent apart (another budget, a
    warning section's cost) get the same step, so the same cut points: the same
    exchange cut at the same place (cut once per process, see :func:`_grid_partial`)."""
    return _GRID_STEPS[max(0, bisect.bisect_right(_GRID_STEPS, size) - 1)]


def _start_within(ex: Exchanges, last: int, room: int) -> int:
    """Smallest start in ``[0, last]`` whose exchanges up to the latest turn cost at
    most ``room`` (suffix sums are monotone: bisection)."""
    if room < 0:
        return last
    return bisect.bisect_left(ex.cum_cost, ex.cum_cost[last] - room, 0, last + 1)


def _partial(
    ex: Exchanges,
    k: int,
    counter: TokenCounter,
    rooms: tuple[int | None, int],
    notice_cost: Callable[[int, int], int],
) -> tuple[Unit, int] | None:
    """Exchange ``k`` with its outputs (then assistant texts) shortened to fit the room
    (``rooms``: messages, tokens; the notice for what stays evicted included), and its
    cost; ``None`` when even its smallest form does not fit or nothing shortens."""
    unit, costs = ex.units[k], ex.costs[k]
    msg_room, room = rooms
    if msg_room is not None and ex.cum_msgs[-1] - ex.cum_msgs[k] > msg_room + _turn_msgs(ex):
        return None
    if not any(m.role in ("tool", "assistant") and m.content for m in unit.messages):
        return None
    room -= notice_cost(ex.cum_msgs[k], ex.cum_cost[k])
    if room <= 0:
        return None
    turn, new_costs, shrunk, fits, elided = shrink_turn(
        [unit], [list(costs)], counter, room, ex.sep
    )
    if not fits or elided or not shrunk:
        return None
    cost = sum(new_costs[0]) + ex.sep * len(new_costs[0])
    return (turn[0], cost) if cost <= room else None


def _origin(heads: Sequence[int], s_min: int, last: int) -> int:
    """The exchange a cut grid's positions are measured from: the first at or after
    the last multiple of :data:`CUT_ORIGIN_EVERY` message positions up to exchange
    ``s_min`` (the same exchange however much older history was read)."""
    at = heads[min(s_min, last)] // CUT_ORIGIN_EVERY * CUT_ORIGIN_EVERY
    return bisect.bisect_left(heads, at, 0, last + 1)


def _grid_start(  # noqa: PLR0917  # private, called once
    ex: Exchanges,
    counter: TokenCounter,
    bounds: tuple[int, int],
    step: int,
    limits: tuple[int, int | None],
    notice_cost: Callable[[int, int], int],
) -> tuple[int, tuple[Unit, int] | None]:
    """Where a from-scratch conversation starts on the cut grid (see ``cut_step`` in
    :func:`fit_history`), and the first exchange shortened when the grid point falls
    inside it; ``(-1, None)`` when the grid point is before ``s_min`` (``bounds``:
    ``s_min``, the latest turn's first exchange; ``limits``: tokens, messages)."""
    (s_min, last), (limit, max_messages) = bounds, limits
    cum_cost, cum_msgs = ex.cum_cost, ex.cum_msgs
    after = cum_cost[-1] - cum_cost[last]  # the latest turn
    room = limit - after - notice_cost(max(1, cum_msgs[last]), cum_cost[last])
    origin = cum_cost[_origin(ex.heads, s_min, last)]
    point = origin - (origin - cum_cost[last] + room) // step * step  # first that fits
    k = max(0, bisect.bisect_right(cum_cost, point, 0, last + 1) - 1)
    if k < s_min - 1 or (k == s_min - 1 and cum_cost[k] >= point):
        return -1, None
    if cum_cost[k] < point and k < last:  # the point falls inside exchange k
        grid = _grid_partial(ex, k, counter, cum_cost[k + 1] - point)
        total = (
            cum_cost[-1] - cum_cost[k + 1] + notice_cost(cum_msgs[k], cum_cost[k]) + grid[1]
            if grid is not None
            else limit + 1
        )
        many = max_messages is not None and cum_msgs[-1] - cum_msgs[k] > max_messages
        return (k, grid) if total <= limit and not many else (k + 1, None)
    return k, None


def _grid_partial(
    ex: Exchanges, k: int, counter: TokenCounter, room: int
) -> tuple[Unit, int] | None:
    """Exchange ``k`` with its outputs (then assistant texts) shortened to at most
    ``room`` tokens (its separators included) and that cost; ``None`` when it cannot
    (nothing to shorten, or too small a room)."""
    unit = ex.units[k]
    if room <= 0 or not any(m.role in ("tool", "assistant") and m.content for m in unit.messages):
        return None
    # A grid point stays where it is while the history grows: the same exchange is cut
    # to the same room prompt after prompt (the same prepared unit object: its costs
    # are those of its messages for this counter).
    key = (id(unit), counter.name, room, ex.sep)
    held = _GRID_CUTS.get(key)
    if held is not None and held[0] is unit:
        return held[1]
    turn, new_costs, shrunk, fits, elided = shrink_turn(
        [unit], [list(ex.costs[k])], counter, room, ex.sep
    )
    cost = sum(new_costs[0]) + ex.sep * len(new_costs[0])
    got = None if not fits or elided or not shrunk or cost > room else (turn[0], cost)
    size = sum(len(m.content) for m in unit.messages) + (
        sum(len(m.content) for m in got[0].messages) if got is not None else 0
    )
    _GRID_CUTS.put(key, (unit, got), size + 64)
    return got


_GRID_CUTS: SizedMemo[tuple[int, str, int, int], tuple[Unit, tuple[Unit, int] | None]] = SizedMemo(
    8 << 20
)
"""Exchanges cut at a grid point in this process, by the prepared exchange (kept alive
here, so its id is not reused) and the room, up to 8 M characters (the exchange's and
the cut's)."""


def _turn_msgs(ex: Exchanges) -> int:
    """Messages of the latest turn (always kept)."""
    return ex.cum_msgs[-1] - ex.cum_msgs[ex.latest]


def _unit_at(heads: Sequence[int], seq: int, last: int) -> int | None:
    """Index of the exchange (up to the latest turn's first) whose first message has ``seq``."""
    k = bisect.bisect_left(heads, seq, 0, last)
    return k if k <= last and k < len(heads) and heads[k] == seq else None


def _anchor(heads: Sequence[int], s_min: int, last: int, batch: int) -> int:
    """First exchange at or after ``s_min`` that starts a new batch on the position grid
    (``heads``: the seq of each exchange's first message, in order)."""
    k0 = max(1, s_min)
    if batch <= 1 or k0 >= last:
        return s_min
    # Seqs only grow, so the grid cell changes first where a seq reaches the next cell.
    k = bisect.bisect_left(heads, (heads[k0 - 1] // batch + 1) * batch, k0, last)
    return k if k < last else s_min
