"""Shrinking a conversation's latest turn (or one exchange) to a token limit, and the
lines a message renders besides its content.

Tool outputs shrink first, then assistant texts: every item over one water level is
cut to it with a visible notice (the largest level that fits, found in one sweep);
only when even every output as a notice does not fit are middle steps elided.
"""

from __future__ import annotations

import operator

from personae.context._lru import IdentityMemo, hold
from personae.context._textcut import Cut, count_small, cut_text
from personae.context.messages import ChatMessage, ChatToolCall, Unit
from personae.tokens.base import TokenCounter

__all__ = [
    "CUTS",
    "OMITTED",
    "Cuts",
    "apply_level",
    "call_lines",
    "header_line",
    "overhead",
    "shrink_turn",
    "water_level",
]

_ARGS_SHOWN = 2000


def header_line(msg: ChatMessage) -> str:
    """A message's header line (its role, and the call it answers)."""
    if msg.role == "tool":
        return f"### tool result {msg.tool_call_id}\n"
    return f"### {msg.role}\n"


def call_lines(msg: ChatMessage) -> str:
    """The lines of the tool calls a message makes (long arguments shortened),
    remembered by the calls object (a shortened copy of a message shares it)."""
    calls = msg.tool_calls
    if not calls:
        return ""
    got = _CALL_LINES.get(calls)
    if got is None:
        lines = []
        for c in calls:
            args = c.arguments
            if len(args) > _ARGS_SHOWN:
                more = len(args) - _ARGS_SHOWN
                args = f"{args[:_ARGS_SHOWN]}… [{more} more characters of arguments]"
            lines.append(f"\n→ call {c.id}: {c.name}({args})")
        got = "".join(lines)
        _CALL_LINES.put(calls, got)
    return got


_CALL_LINES: IdentityMemo[tuple[ChatToolCall, ...], str] = IdentityMemo(4096)
"""The call lines of the messages rendered lately, by their calls object."""


_OVERHEADS: dict[tuple[str, str, str | None, tuple[ChatToolCall, ...]], int] = {}
"""Tokens of each header and call lines counted in this process (by what they show)."""
_OVERHEADS_MAX = 1 << 14


_OVERHEAD_BY_ID: IdentityMemo[ChatMessage, tuple[str, int]] = IdentityMemo(4096)
"""The same counts by the message object (with the counter's name): the latest turn's
messages, met at every budget, skip hashing their tool calls."""


def overhead(msg: ChatMessage, counter: TokenCounter) -> int:
    """Tokens of a message's header and call lines (everything but the content)."""
    same = _OVERHEAD_BY_ID.get(msg)
    if same is not None and same[0] == counter.name:
        return same[1]
    got = _overhead_of(msg, counter)
    _OVERHEAD_BY_ID.put(msg, (counter.name, got))
    return got


def _overhead_of(msg: ChatMessage, counter: TokenCounter) -> int:
    """:func:`overhead`, by what the header and call lines show."""
    key = (counter.name, msg.role, msg.tool_call_id, msg.tool_calls)
    got = _OVERHEADS.get(key)
    if got is None:
        extra = call_lines(msg)
        got = count_small(counter, header_line(msg)) + (count_small(counter, extra) if extra else 0)
        hold(_OVERHEADS, key, got, _OVERHEADS_MAX)
    return got


CUTS: IdentityMemo[ChatMessage, Cut] = IdentityMemo(256)
"""Messages whose content is a cut read off token offsets, with that cut: the exact
count of their exchange is then read off the offsets too (see :func:`_render_cut`)."""

Cuts = dict[int, Cut]
"""Cuts made for one fitting, by the id of the message holding each (alive meanwhile)."""


def shrink_turn(  # noqa: PLR0917  # private
    turn: list[Unit],
    costs: list[list[int]],
    counter: TokenCounter,
    limit: int,
    sep: int,
    made: Cuts | None = None,
) -> tuple[list[Unit], list[list[int]], int, bool, int]:
    """Shrink tool outputs, then assistant texts, of the latest turn to fit ``limit``
    (``made``: where the cuts go, else :data:`CUTS`)."""
    fixed, items, pools = _pools(turn, costs, counter, sep)
    for pool, rest in pools:
        level = water_level(pool, limit - fixed - rest)
        if level is None:
            continue
        turn, costs, shrunk = apply_level(turn, costs, (pool, level), counter, made)
        return turn, costs, shrunk, True, 0
    # Last resort: every output becomes a notice, then middle steps of the turn are elided.
    turn, costs, shrunk = apply_level(turn, costs, (items, 0), counter, made)
    elided = 0
    while len(turn) > 2 and sum(sum(c) + sep * len(c) for c in costs) > limit:
        elided += len(turn[1].messages)
        del turn[1], costs[1]
    fits = sum(sum(c) + sep * len(c) for c in costs) <= limit
    return turn, costs, shrunk, fits, elided


_Item = tuple[int, int, int, int]
"""A message that may shrink: its cost, its floor (header and notice), unit and message
index."""
_Pools = tuple[int, list[_Item], tuple[tuple[list[_Item], int], ...]]
"""Tokens that never shrink (other messages, separators), every item, and the pools
shrunk in turn with the cost of the items outside each (tool outputs first)."""


def _pools(turn: list[Unit], costs: list[list[int]], counter: TokenCounter, sep: int) -> _Pools:
    """What :func:`shrink_turn` shrinks in ``turn`` (remembered for the same exchange
    objects and costs: the latest turn is shrunk again at every budget below its size)."""
    held = _POOLS.get(turn[0]) if turn else None
    if (
        held is not None
        and held[0] == (counter.name, sep)
        and len(held[1]) == len(turn)
        and all(map(operator.is_, held[1], turn))
        and held[2] == costs
    ):
        return held[3]
    fixed = 0
    omitted = count_small(counter, OMITTED)
    items: list[_Item] = []
    tools: list[bool] = []  # per item: a tool output (shrunk first)
    for k, (u, c) in enumerate(zip(turn, costs, strict=True)):
        for j, (m, cost) in enumerate(zip(u.messages, c, strict=True)):
            fixed += sep
            if m.role in ("tool", "assistant") and m.content:
                floor = overhead(m, counter) + omitted
                items.append((cost, min(cost, floor), k, j))
                tools.append(m.role == "tool")
            else:
                fixed += cost
    only_tools = [it for it, tool in zip(items, tools, strict=True) if tool]
    rest = sum(it[0] for it, tool in zip(items, tools, strict=True) if not tool)
    got: _Pools = (fixed, items, ((only_tools, rest), (items, 0)))
    if turn:
        _POOLS.put(turn[0], ((counter.name, sep), tuple(turn), [list(c) for c in costs], got))
    return got


_POOLS: IdentityMemo[Unit, tuple[tuple[str, int], tuple[Unit, ...], list[list[int]], _Pools]] = (
    IdentityMemo(256)
)
"""The shrinkable items of the turns shrunk lately, by their first exchange object."""


OMITTED = "[output omitted to fit the budget]"


def water_level(pool: list[tuple[int, int, int, int]], room: int) -> int | None:
    """Largest per-item cap L with sum(max(floor, min(cost, L))) <= room, or None.

    Each item grows one token per level from its floor to its cost (a floor is never
    above its cost), so the total is linear between consecutive floors and costs: one
    sweep over them in order finds the segment where it passes ``room`` and reads the
    level off it (the sorted floors and costs of a pool are remembered: the latest
    turn's pools are swept again at every budget below its size)."""
    steps = _STEPS.get(pool)
    if steps is None:
        steps = _steps(pool)
        _STEPS.put(pool, steps)
    at, whole, top, events = steps
    if at > room:
        return None
    if whole <= room:
        return top
    prev, slope = 0, 0  # the level swept to, and how many items grow past it
    for point, delta in events:
        if point > prev:
            grown = at + slope * (point - prev)
            if grown > room:  # slope > 0: the total grew past ``room`` on this segment
                return prev + (room - at) // slope
            at, prev = grown, point
        slope += delta
    raise AssertionError("total(max cost) > room")  # pragma: no cover - checked above


_Steps = tuple[int, int, int, list[tuple[int, int]]]
"""A pool's total at its floors, its total whole, its largest cost, and its floors and
costs in order (each with +1 or -1: an item starts or stops growing there)."""


def _steps(pool: list[_Item]) -> _Steps:
    """What :func:`water_level` sweeps for ``pool``."""
    growing = [(c, fl) for c, fl, _, _ in pool if fl < c]
    events = sorted([(fl, 1) for _, fl in growing] + [(c, -1) for c, _ in growing])
    costs = [c for c, _, _, _ in pool]
    return sum([fl for _, fl, _, _ in pool]), sum(costs), max(costs, default=0), events


_STEPS: IdentityMemo[list[_Item], _Steps] = IdentityMemo(256)
"""The steps of the pools swept lately, by the pool object."""


def apply_level(
    turn: list[Unit],
    costs: list[list[int]],
    at: tuple[list[_Item], int],
    counter: TokenCounter,
    made: Cuts | None,
) -> tuple[list[Unit], list[list[int]], int]:
    """Every item of the pool over the level cut to it (``at``: the pool and the level;
    ``made``: where the cuts go, else :data:`CUTS`)."""
    pool, level = at
    turn = list(turn)
    costs = [list(c) for c in costs]
    shrunk = 0
    for cost, floor, k, j in pool:
        if cost <= level:
            continue
        msg = turn[k].messages[j]
        over = overhead(msg, counter)
        note = f"[output shortened to fit the budget: {len(msg.content):,} characters in full]"
        body = cost - over  # the content's own count, known from the stored/first count
        cut = (
            cut_text(msg.content, level - over, counter, note, total=max(1, body))
            if level > over
            else None
        )
        if cut is not None and over + cut.tokens <= max(level, floor):
            text, new_cost = cut.text, over + cut.tokens
        else:
            text, new_cost, cut = OMITTED, floor, None
        msgs = list(turn[k].messages)
        msgs[j] = ChatMessage(
            msg.role, text, msg.tool_calls, msg.tool_call_id, None, msg.seq, msg.counter
        )
        if cut is not None and cut.split:
            if made is None:
                CUTS.put(msgs[j], cut)
            else:
                made[id(msgs[j])] = cut
        turn[k] = Unit(tuple(msgs))
        costs[k][j] = new_cost
        shrunk += 1
    return turn, costs, shrunk
