"""Render a prompt and count it exactly, counting only what the last prompts did not have.

For o200k_base and cl100k_base, the pre-tokenizer always starts a new piece
after a blank line that is followed by '<' (a section's tag), '#' (a message
header) or '[' (a notice), and BPE never merges across pieces: the count of a
prompt is the sum of the counts of the groups it is cut into there. A group
made of the same string objects as one of an earlier prompt (an unchanged
exchange, text or tag) is looked up without hashing its text again (Python
keeps each string's hash), so an agent loop counts only what is new. A new
piece that is mostly text counted before (an exchange with an output cut at a
new place) is counted from its parts (see :func:`count_later`).
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable, Sequence

from personae.context._lru import IdentityMemo, SizedMemo, recall, remember
from personae.context._textcut import SPLITTABLE, count_followed, count_small
from personae.context.render import SEPARATOR, close_tag, open_tag
from personae.tokens.base import TokenCounter

__all__ = ["count_later", "render_counted"]

_STARTS = ("<", "#", "[")
"""A group boundary is a blank line followed by one of these."""

Group = tuple[str, ...]


def _section_groups(
    tag: str, pieces: Sequence[str], tail: str, groups: list[Group], single: list[str]
) -> None:
    """Cut one section (its pieces joined by blank lines, then ``tail``) into groups.

    A middle piece that starts a group and is followed by one that does too is
    its own group (the piece and a blank line): those go to ``single``.
    """
    blocks = pieces or ("",)
    n = len(blocks)
    if n > 2 and all(map(str.startswith, blocks[1:], itertools.repeat(_STARTS))):
        groups.append((open_tag(tag), blocks[0], SEPARATOR))
        single.extend(blocks[1:-1])
        groups.append((blocks[-1], close_tag(tag), tail))
        return
    cur: list[str] = [open_tag(tag)]
    for j, block in enumerate(blocks):
        if j and block.startswith(_STARTS):
            groups.append(tuple(cur))
            cur = []
        cur.append(block)
        cur.append(SEPARATOR if j < n - 1 else close_tag(tag))
    cur.append(tail)
    groups.append(tuple(cur))


def render_counted(
    counter: TokenCounter,
    sections: Sequence[tuple[str, Sequence[str]]],
    *,
    remember_prompt: bool = True,
) -> tuple[str, int]:
    """Render ``(tag, pieces)`` sections and count the result exactly.

    Each section's content is its pieces joined by a blank line, so the text is
    what :func:`~personae.context.render.render_sections` renders for the joined
    contents. Counters other than exact o200k_base and cl100k_base count the
    whole text.

    The prompt and its count are remembered by the sections' tags and pieces: a
    fitting that keeps what an earlier one kept (another budget with the same cut
    point, the same budget again) gets that prompt back without joining or counting
    it. ``remember_prompt=False``: pieces new to this fitting (a latest turn cut to
    this budget), never met again: not looked up, not kept.
    """
    if not remember_prompt:
        return _render_counted(counter, sections, fresh=True)
    key = (counter.name, *((tag, tuple(pieces)) for tag, pieces in sections))
    got = _PROMPTS.get(key)
    if got is None:
        got = _render_counted(counter, sections)
        # Sized by the prompt and the pieces the key keeps alive (about as long).
        _PROMPTS.put(key, got, 2 * len(got[0]) + 64)
    return got


_PROMPTS: SizedMemo[tuple[object, ...], tuple[str, int]] = SizedMemo(16 << 20)
"""Prompts rendered and counted lately (see :func:`render_counted`), by the counter's
name and each section's tag and pieces (equal strings, mostly the very objects), least
recently used dropped past 16 M characters held (prompts and the pieces of their keys)."""


def _render_counted(
    counter: TokenCounter, sections: Sequence[tuple[str, Sequence[str]]], *, fresh: bool = False
) -> tuple[str, int]:
    """:func:`render_counted`, not remembered (``fresh``: the pieces said to be counted
    later, see :func:`count_later`, are new to this prompt: counted by what was said,
    neither hashed nor remembered)."""
    out: list[str] = []
    for i, (tag, pieces) in enumerate(sections):
        if i:
            out.append(SEPARATOR)
        out.append(open_tag(tag))
        # The pieces and their separators go into the one join of the prompt (joining
        # a section first would copy its text twice).
        out.extend(itertools.chain.from_iterable(zip(pieces, itertools.repeat(SEPARATOR))))
        if pieces:
            out.pop()
        out.append(close_tag(tag))
    rendered = "".join(out)
    if counter.name not in SPLITTABLE or not getattr(counter, "exact", False):
        return rendered, counter.count(rendered) if rendered else 0
    groups: list[Group] = []
    single: list[str] = []
    last = len(sections) - 1
    for i, (tag, pieces) in enumerate(sections):
        _section_groups(tag, pieces, SEPARATOR if i < last else "", groups, single)
    if fresh:
        total, groups, single = _count_fresh(counter, groups, single)
        return rendered, total + _count_groups(counter, groups) + _count_single(counter, single)
    return rendered, _count_groups(counter, groups) + _count_single(counter, single)


_GROUPS: dict[str, OrderedDict[Group, int]] = {}
"""Per counter, counts of recently rendered groups (least recently used go first)."""
_GROUPS_MAX = 1 << 14

_SINGLE: dict[str, dict[str, int]] = {}
"""Per counter, count of each recent single piece followed by a blank line."""
_SINGLE_MAX = 1 << 17


_LATER: IdentityMemo[str, tuple[str, Callable[[str], int | None]]] = IdentityMemo(64)
"""By piece (the very string object: a new piece is often long, and hashing it costs
microseconds), with the counter's name, how to count it followed by other text
without counting all of it (see :func:`count_later`)."""


def count_later(counter: TokenCounter, piece: str, count: Callable[[str], int | None]) -> None:
    """Say how to count ``piece`` followed by other text exactly when a prompt holds it:
    ``count(after)`` is the exact count of ``piece + after`` (``None``: count it whole).
    For a new piece that is mostly text counted before (an exchange with one output
    cut at a new place: its kept part's tokens are read off the output's offsets)."""
    _LATER.put(piece, (counter.name, count))  # the pieces of the last prompts are asked for


def _later(counter: TokenCounter, piece: str) -> Callable[[str], int | None] | None:
    """How to count ``piece`` followed by other text, when :func:`count_later` said."""
    held = _LATER.get(piece)
    return held[1] if held is not None and held[0] == counter.name else None


def _count_new(
    counter: TokenCounter,
    piece: str,
    after: str,
    later: Callable[[str], int | None] | None = None,
) -> int:
    """Exact count of ``piece + after`` (a piece no earlier prompt had; ``later``: how
    to count it, when the caller looked it up already)."""
    later = later or _later(counter, piece)
    n = later(after) if later is not None else None
    return n if n is not None else count_small(counter, piece + after)


def _count_fresh(
    counter: TokenCounter, groups: list[Group], single: list[str]
) -> tuple[int, list[Group], list[str]]:
    """The count of the groups and single pieces that start with a piece said to be
    counted later (new to this prompt), and the others."""
    total = 0
    others: list[Group] = []
    for g in groups:
        later = _later(counter, g[0])
        if later is None:
            others.append(g)
        else:
            total += _count_new(counter, g[0], "".join(g[1:]), later)
    rest: list[str] = []
    for piece in single:
        later = _later(counter, piece)
        if later is None:
            rest.append(piece)
        else:
            total += _count_new(counter, piece, SEPARATOR, later)
    return total, others, rest


def _count_groups(counter: TokenCounter, groups: list[Group]) -> int:
    memo = _GROUPS.setdefault(counter.name, OrderedDict())
    total = 0
    for g in groups:
        n = recall(memo, g)
        if n is None and len(g) == 3 and g[0].endswith("\n") and g[1].startswith("["):
            # A section opening on a notice (an eviction notice the fit counted): a
            # newline before '[' always starts a piece.
            n = count_small(counter, g[0]) + count_followed(counter, g[1], g[2])
            remember(memo, g, n, _GROUPS_MAX)
        elif n is None:
            n = _count_new(counter, g[0], "".join(g[1:]))
            remember(memo, g, n, _GROUPS_MAX)
        total += n
    return total


def _count_single(counter: TokenCounter, pieces: list[str]) -> int:
    memo = _SINGLE.setdefault(counter.name, {})
    counts = list(map(memo.get, pieces))  # C-speed: a dict lookup per piece, cached hashes
    if None in counts:
        if len(memo) + len(pieces) > _SINGLE_MAX:
            memo.clear()  # rare: far more distinct pieces than any prompt holds
        for k, (piece, n) in enumerate(zip(pieces, counts, strict=True)):
            if n is None:
                counts[k] = memo[piece] = _count_new(counter, piece, SEPARATOR)
    return sum(counts)  # type: ignore[arg-type]
