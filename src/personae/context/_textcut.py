"""Cut text to a token limit with a visible notice, counting as little as possible.

Cut points are found by a galloping binary search over character offsets,
started from the text's own tokens-per-character ratio, so a cut costs a few
counts of strings about the size of the kept part, never a loop over the text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from personae.tokens.base import TokenCounter

__all__ = ["Cut", "count_small", "cut_text", "outline"]

_SMALL: dict[tuple[str, str], int] = {}
_SMALL_MAX = 4096
_MEMO_CHARS = 4_096  # longer texts are memoized by digest


def count_small(counter: TokenCounter, text: str) -> int:
    """Count a string (tags, headers, notices, section texts), memoized per counter.

    Turn after turn the same directive, persona block and headers come back;
    each is counted once per process (bounded memo, cleared when full).
    """
    # Long texts are remembered by digest, so the memo never keeps them alive.
    key = (
        (counter.name, text)
        if len(text) <= _MEMO_CHARS
        else (counter.name, hashlib.blake2b(text.encode("utf-8", "surrogatepass")).hexdigest())
    )
    hit = _SMALL.get(key)
    if hit is None:
        hit = counter.count(text)
        if len(_SMALL) >= _SMALL_MAX:
            _SMALL.clear()
        _SMALL[key] = hit
    return hit


@dataclass(frozen=True, slots=True)
class Cut:
    """A shortened text."""

    text: str
    """Kept text plus the notice."""
    tokens: int
    """Exact token count of ``text``."""


def _largest(n: int, guess: int, fits: Callable[[int], bool]) -> int:
    """Largest k in [0, n] with fits(k), assuming fits is (nearly) monotone."""
    guess = max(0, min(n, guess))
    if fits(guess):
        lo, step = guess, max(16, guess // 8)
        hi = lo + step
        while hi < n and fits(hi):
            lo, step = hi, step * 2
            hi = lo + step
        if hi >= n:
            if fits(n):
                return n
            hi = n
    else:
        hi, step = guess, max(16, guess // 8)
        lo = hi - step
        while lo > 0 and not fits(lo):
            hi, step = lo, step * 2
            lo = hi - step
        lo = max(0, lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _snap(text: str, k: int, keep_head: bool) -> int:
    """Move a cut to a line boundary when one is near (only ever shortening)."""
    window = max(80, k // 10)
    if keep_head:
        at = text.rfind("\n", max(0, k - window), k)
        return at if at > 0 else k
    n = len(text)
    at = text.find("\n", n - k, min(n, n - k + window))
    return n - at - 1 if at >= 0 else k


def cut_text(
    text: str,
    limit: int,
    counter: TokenCounter,
    notice: str,
    *,
    keep_head: bool = True,
    total: int | None = None,
) -> Cut | None:
    """Shorten ``text`` so that it plus ``notice`` counts at most ``limit`` tokens.

    ``keep_head`` keeps the beginning (cuts the end); otherwise keeps the end.
    The notice goes where the text was cut. Returns ``None`` when not even the
    notice fits.
    """
    notice_tokens = count_small(counter, notice) + 1
    if notice_tokens > limit:
        return None
    full = total if total is not None else counter.count(text)
    target = limit - notice_tokens
    n = len(text)

    def part(k: int) -> str:
        return text[:k] if keep_head else text[n - k :]

    def fits(k: int) -> bool:
        return counter.count(part(k)) <= target

    guess = int(n * target / full) if full else n
    k = _largest(n, guess, fits) if target > 0 else 0
    k = _snap(text, k, keep_head) if 0 < k < n else k
    while True:
        kept = part(k).rstrip("\n") if keep_head else part(k).lstrip("\n")
        joined = f"{kept}\n{notice}" if keep_head else f"{notice}\n{kept}"
        if not kept:
            joined = notice
        tokens = counter.count(joined)
        if tokens <= limit or k == 0:
            break
        k = max(0, k - max(1, k // 16))  # rare: a merge across the join cost a token
    if tokens > limit:
        return None
    return Cut(text=joined, tokens=tokens)


_FIRST = 200


def _first_sentence(line: str) -> str:
    end = line.find(". ")
    if 0 <= end < _FIRST:
        return line[: end + 1]
    return line if len(line) <= _FIRST else line[:_FIRST].rstrip() + "…"


def outline(text: str) -> str:
    """A deterministic extractive summary: Markdown headings and the first sentence under each."""
    out: list[str] = []
    want_line = True
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            out.append(line.rstrip())
            want_line = True
        elif stripped and want_line:
            out.append(_first_sentence(line.rstrip()))
            want_line = False
    return "\n".join(out)
