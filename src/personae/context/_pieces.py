"""Where the o200k_base and cl100k_base pre-tokenizers start a new piece whatever
follows (BPE never merges across pieces, so the counts of the text before and after
such a place add up): the rules, and the last such place near a text's end."""

from __future__ import annotations

import re

__all__ = ["SPLIT_SCAN", "last_piece_start", "starts_piece"]

SPLIT_SCAN = 2048
"""How far from a cut a piece boundary is looked for (past it, the whole form is counted)."""
_NEVER_FOLLOWS = frozenset(" \t\n\r\x0b\x0c/")
_AFTER_WORD = frozenset('!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~。、，！？：；（）「」『』【】・')


def starts_piece(text: str, p: int, end: int) -> bool:
    """True when the o200k_base and cl100k_base pre-tokenizers start a new piece at
    ``p`` in any text that has ``text[:end]`` as its start (BPE never merges across
    pieces, so the counts before and after ``p`` add up).

    Three places: after a newline, before a letter or a printable ASCII character
    other than '/' (no piece runs over a newline into such a character: only
    punctuation takes newlines, and '/' after them); at a space before a letter
    (a piece may start with one space before letters, none ends with one); and
    after a letter, at punctuation other than an apostrophe (a word's piece takes
    letters, marks and an apostrophe's contraction, nothing else).
    """
    if p <= 0 or p >= end:
        return False
    c, before = text[p], text[p - 1]
    if before == "\n":
        return c.isalpha() or ("!" <= c <= "~" and c not in _NEVER_FOLLOWS)
    if c == " ":
        return p + 1 < end and text[p + 1].isalpha()
    return c in _AFTER_WORD and before.isalpha()


_CANDIDATES = re.compile("[\n " + re.escape("".join(sorted(_AFTER_WORD))) + "]")
"""What every place :func:`starts_piece` accepts has at or just before it: a newline
before it, or a space or punctuation at it."""


def last_piece_start(text: str, end: int) -> int | None:
    """The last place in ``text[:end]`` (within :data:`SPLIT_SCAN` of its end) where
    the pre-tokenizer starts a piece whatever follows (see :func:`starts_piece`).

    :data:`_LAST_START` finds, from the end back in one C-speed match, the last place
    that may be one (each of its branches accepts all that a rule of
    :func:`starts_piece` does, and letters in a wider sense); that place is checked,
    and only when it is not one (a rare near-miss, such as a space after a newline) are
    the candidates of :data:`_CANDIDATES` walked back one by one. The last 64
    characters are tried first, so a short search does not scan the whole reach."""
    reach = max(0, end - SPLIT_SCAN)
    for lo in (max(reach, end - 64), reach):
        m = _LAST_START.match(text, lo, end)
        if m is not None:
            p = max(m.start(1), m.start(2), m.start(3))
            if lo < p and starts_piece(text, p, end):
                return p
            return _walk_back(text, end)
        if lo == reach:
            break
    return None


_LAST_START = re.compile(
    r"(?s).*(?:(?<=\n)()(?=[^\W\d_]|[!-.0-~])|() (?=[^\W\d_])|(?<=[^\W\d_])()["
    + re.escape("".join(sorted(_AFTER_WORD)))
    + "])"
)
"""The last place that may start a piece whatever follows, a superset of what
:func:`starts_piece` accepts (its letter class takes every letter and a few other word
characters): after a newline before a letter or a printable character other than '/',
at a space before a letter, or at punctuation after a letter."""


def _walk_back(text: str, end: int) -> int | None:
    """:func:`last_piece_start` by the candidates of :data:`_CANDIDATES`, checked from
    the last one, in the last 16 characters first, then 64 (a text without spaces,
    newlines or punctuation there is not walked character by character)."""
    for width in (16, 64, SPLIT_SCAN):
        lo = max(0, end - width)
        found = [
            q + 1 if text[q] == "\n" else q
            for q in map(re.Match.start, _CANDIDATES.finditer(text, lo, end))
        ]
        for p in reversed(found):
            if lo < p < end and starts_piece(text, p, end):
                return p
        if lo == max(0, end - SPLIT_SCAN):
            break
    return None
