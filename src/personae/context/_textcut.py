"""Cut text to a token limit with a visible notice, counting as little as possible.

Cut points are found by an interpolation search over character offsets
(safeguarded by bisection), started from the text's own tokens-per-character
ratio, so a cut costs a few counts of strings about the size of the kept part,
never a loop over the text.
"""

from __future__ import annotations

import hashlib
import itertools
import operator
import re
import threading
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, overload

from personae.context import _diskcounts
from personae.context._lru import IdentityMemo, SizedMemo, recall, remember
from personae.context._pieces import SPLIT_SCAN, last_piece_start, starts_piece
from personae.tokens.base import TokenCounter

__all__ = [
    "SPLITTABLE",
    "Cut",
    "count_around",
    "count_cuttable",
    "count_followed",
    "count_rendered",
    "count_small",
    "count_text_around",
    "cut_text",
    "outline",
    "outline_cut",
    "recall_counts",
]

_SMALL: OrderedDict[tuple[str, str | bytes], int] = OrderedDict()
_SMALL_MAX = 1 << 18
"""Most remembered counts (least recently used go first): about 30 MB at most, enough
for the 100,000-message sessions of the benchmark to stay counted between turns."""
_MEMO_CHARS = 64  # longer texts are remembered by a 16-byte digest, never kept alive


def count_small(counter: TokenCounter, text: str) -> int:
    """Count a string (tags, headers, notices, section texts, messages), memoized per counter.

    Turn after turn the same directive, persona block, headers and messages come
    back; each is counted once per process. The memo is a bounded LRU, so a
    session larger than the memo loses only its least recently used counts
    instead of the whole memo.
    """
    return _remembered_count(counter, text, lambda _digest: counter.count(text))


def _digest(text: str) -> bytes:
    """The 16-byte key a long text is remembered by (in memory and on disk)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _remembered_count(
    counter: TokenCounter, text: str, count: Callable[[bytes | None], int]
) -> int:
    """The count of ``text`` from this process's memo, else an earlier process's (on
    disk, exact counters), else ``count(digest)`` (``digest``: the text's key when it
    is long, else ``None``), remembered in both."""
    key: tuple[str, str | bytes] = (
        (counter.name, text) if len(text) <= _MEMO_CHARS else (counter.name, _digest(text))
    )
    hit = recall(_SMALL, key)
    if hit is None:
        digest = key[1] if isinstance(key[1], bytes) else None
        on_disk = digest is not None and getattr(counter, "exact", False)
        if (
            digest is not None
            and on_disk
            and len(text) >= _diskcounts.MIN_CHARS
            and (counter.name, digest) not in _ASKED
        ):
            hit = _diskcounts.lookup(counter.name, [digest]).get(digest)  # an earlier process's
        if hit is None:
            hit = count(digest)
            if digest is not None and on_disk:
                _diskcounts.record(counter.name, digest, hit)
        remember(_SMALL, key, hit, _SMALL_MAX)
    return hit


def recall_counts(counter: TokenCounter, texts: Iterable[str]) -> None:
    """Look the texts an earlier process counted up on disk in one go (before counting
    them one by one with :func:`count_small`, which then finds them in memory)."""
    if not getattr(counter, "exact", False):
        return
    name = counter.name
    keys = []
    for text in texts:
        if len(text) > _MEMO_CHARS:
            digest = _digest(text)
            if (name, digest) not in _SMALL:
                keys.append(digest)
    found = _diskcounts.lookup(name, keys)
    for digest, n in found.items():
        remember(_SMALL, (name, digest), n, _SMALL_MAX)
    if len(_ASKED) + len(keys) > _SMALL_MAX:
        _ASKED.clear()
    _ASKED.update((name, k) for k in keys if k not in found)


_ASKED: set[tuple[str, bytes]] = set()
"""Digests :func:`recall_counts` found nowhere on disk: :func:`count_small` counts them
without asking again."""


SPLITTABLE = frozenset({"o200k_base", "cl100k_base"})
# After a blank line and before '<' (a tag), '#' (a message header) or '[' (a notice):
# the pre-tokenizers of these encodings always start a new piece there, and BPE never
# merges across pieces, so the counts of the parts add up to the count of the whole.
_BOUNDARY = re.compile(r"\n\n(?=[<#\[])")


def _parts(text: str) -> list[str]:
    """``text`` split after each blank line that precedes '<', '#' or '[' (a scan for
    blank lines: much faster than splitting on a zero-width look-behind)."""
    out: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        out.append(text[start : m.end()])
        start = m.end()
    out.append(text[start:])
    return out


def count_rendered(counter: TokenCounter, text: str) -> int:
    """Exact count of a rendered prompt, reusing the counts of unchanged parts.

    For o200k_base and cl100k_base the text is split where their pre-tokenizer
    always splits (after a blank line, before a tag, header or notice) and each
    part is counted once per process (the LRU memo); a turn that adds a few
    messages counts only those. Other counters count the whole text.
    """
    if counter.name not in SPLITTABLE or not getattr(counter, "exact", False):
        return counter.count(text)
    last = _LAST_PARTS.get(counter.name, {})
    seen: dict[str, int] = {}
    total = 0
    for part in _parts(text):
        if not part:
            continue
        n = last.get(part)
        if n is None:
            n = count_small(counter, part)
        seen[part] = n
        total += n
    _LAST_PARTS[counter.name] = seen
    return total


_LAST_PARTS: dict[str, dict[str, int]] = {}
"""Per counter, the part counts of the last prompt verified: the next turn's unchanged
parts are found by a plain string lookup (no digest). Only one prompt's parts are kept."""


@dataclass(frozen=True, slots=True)
class Cut:
    """A shortened text."""

    text: str
    """Kept text plus the notice."""
    tokens: int
    """Exact token count of ``text``."""
    split: int = 0
    """A place where the pre-tokenizer starts a new piece in ``text`` whatever follows
    it (0: none known): ``text[:split]`` is the cut text's own start."""
    before: int = 0
    """Tokens of ``text[:split]`` (read off the cut text's token offsets)."""


def _largest(n: int, guess: int, measure: Callable[[int], int], target: int) -> int:
    """Largest k in [0, n] with ``measure(k) <= target``, assuming measure is (nearly) monotone.

    ``measure(k)`` is the token count of the first (or last) k characters, and
    ``measure(0) == 0``. Counts grow almost linearly with k, so the next probe is
    interpolated from the bracketing counts (regula falsi) instead of halving the
    bracket; a probe that does not at least halve the bracket is followed by a
    bisection step, so the search never takes more probes than bisection would
    plus one each. The answer is the same boundary binary search finds (for a
    monotone measure) at a fraction of the counts.
    """
    lo, c_lo = 0, 0
    hi, c_hi = n + 1, -1  # -1: no probe has failed yet (n itself not tried)
    k = max(1, min(n, guess))
    bisect = False
    while True:
        width = hi - lo
        c = measure(k)
        if c <= target:
            lo, c_lo = k, c
            if lo >= n:
                return n
        else:
            hi, c_hi = k, c
        if hi - lo <= 1:
            return lo
        if c_hi < 0:  # only successes so far: extrapolate past the boundary
            rate = c_lo / lo if c_lo else 1 / 4
            step = int((target + 1 - c_lo) / rate * 1.05) + 8 if rate > 0 else n
            k = min(n, lo + max(16, step))
            continue
        if bisect or c_hi <= c_lo:
            k = (lo + hi) // 2
        else:
            k = lo + int((target + 0.5 - c_lo) * (hi - lo) / (c_hi - c_lo))
            k = min(hi - 1, max(lo + 1, k))
        bisect = not bisect and 2 * (hi - lo) > width


def _snap(text: str, k: int, keep_head: bool) -> int:
    """Move a cut to a line boundary when one is near (only ever shortening).

    The window is small (at most 2.5% of the kept part, and at most 400
    characters) so snapping never wastes more than a sliver of the budget; a
    short kept part (under 1,600 characters) is not snapped at all.
    """
    window = min(400, k // 40)
    if window < 40:
        return k
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
    target = limit - notice_tokens
    n = len(text)

    def part(k: int) -> str:
        return text[:k] if keep_head else text[n - k :]

    def measure(k: int) -> int:
        return counter.count(part(k))

    starts = _token_starts(counter, text) if target > 0 else None
    if starts is not None:
        cut = _from_starts(
            text, starts, limit=limit, notice_counted=(notice, notice_tokens - 1), counter=counter,
            keep_head=keep_head,
        )  # fmt: skip
        if cut is not None:
            return cut
    full = total if total is not None else counter.count(text)
    guess = int(n * target / full) if full else n
    k = _largest(n, guess, measure, target) if target > 0 else 0
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


class _Starts(Sequence[int]):
    """The character offset of each token of a text (what tiktoken's
    ``decode_with_offsets`` gives: a token that starts inside a character starts at
    that character; read per token from :data:`_TOKEN_CHARS`, C-speed passes instead
    of a Python loop over each token's bytes), computed as far as asked: a cut
    keeping the first ``j`` tokens reads offsets up to about ``j`` (doubling what it
    holds when it must go further), so a text's first cut costs a pass over the part
    it keeps, not over the whole text. Shared between threads (a process-wide memo
    holds it): one extends it at a time."""

    def __init__(self, encoding: Any, tokens: Sequence[int], ascii_only: bool) -> None:
        self.encoding, self.tokens, self.ascii_only = encoding, tokens, ascii_only
        self.done = array("I")
        """Offsets of the first tokens."""
        self.chars = 0
        """Characters started by those tokens."""
        self.lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.tokens)

    @overload
    def __getitem__(self, i: int) -> int: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[int]: ...
    def __getitem__(self, i: int | slice) -> int | Sequence[int]:
        if isinstance(i, slice) or i < 0:
            self._extend(len(self.tokens))
            return self.done[i]
        if i >= len(self.done):
            self._extend(i + 1)
        return self.done[i]

    def tokens_before(self, p: int) -> int:
        """How many tokens start before character ``p`` (``bisect_left`` of the offsets)."""
        while (not self.done or self.done[-1] < p) and len(self.done) < len(self.tokens):
            self._extend(len(self.done) + 1)
        return bisect_left(self.done, p)

    def _extend(self, upto: int) -> None:
        """Offsets up to token ``upto`` at least (twice what is held, when more)."""
        with self.lock:
            self._extend_held(upto)

    def _extend_held(self, upto: int) -> None:
        """:meth:`_extend` with the lock held (another thread may have extended first)."""
        start = len(self.done)
        end = min(len(self.tokens), max(upto, 2 * start, 256))
        if upto <= start or end <= start:
            return
        chunk = self.tokens[start:end]
        try:
            self._fill(chunk)
            known = self.done[-1] - self.chars < _UNKNOWN  # else one token not met yet
        except OverflowError:  # two or more tokens not met yet
            known = False
        if not known:
            del self.done[start:]
            self._fill(chunk, learn=True)
        self.chars = self.done.pop()

    def _fill(self, chunk: Sequence[int], *, learn: bool = False) -> None:
        """Append the offsets of ``chunk``'s tokens, then the characters started before
        the next token (``learn``: the table learns the tokens it has not met first).
        One C-speed pass: a token not met yet counts :data:`_UNKNOWN` characters, which
        the caller sees in the last value (or in an overflow, for two or more)."""
        if learn:
            _learn(self.encoding, chunk)
        leads, inside, starting_inside = _token_table(self.encoding)
        acc = itertools.accumulate(_picked(leads, chunk), initial=self.chars)
        if self.ascii_only or starting_inside.isdisjoint(chunk):
            # No token starts inside a character (in CJK text too, mostly): a token's
            # offset is the characters its predecessors started.
            self.done.extend(acc)
        else:
            self.done.extend(
                map(operator.sub, acc, itertools.chain(map(inside.__getitem__, chunk), (0,)))
            )


_STARTS: SizedMemo[tuple[str, bytes], _Starts] = SizedMemo(1 << 23)
"""Token offsets by the text's digest, least recently used dropped past 4 M tokens
(8 bytes each: its tokens and their offsets)."""
_STARTS_BY_ID: IdentityMemo[str, tuple[str, _Starts]] = IdentityMemo(1024)
"""The same offsets (with the counter's name) by the text object: a message's content
cut again (another budget, a later prompt) skips the digest."""
_STARTS_MIN_CHARS = 256
"""Shorter texts are cut by a few counts; longer ones by their token offsets."""


def _token_starts(counter: TokenCounter, text: str) -> _Starts | None:
    """Character offset of each token of ``text`` (tiktoken counters; memoized by digest,
    computed as far as cuts ask, see :class:`_Starts`).

    A huge tool output is encoded once; every later cut of it (other budgets,
    later turns) reads its cut point from the offsets and only verifies it.
    """
    encoding = getattr(counter, "encoding", None)
    if len(text) < _STARTS_MIN_CHARS or encoding is None or not getattr(counter, "exact", False):
        return None
    same = _STARTS_BY_ID.get(text)
    if same is not None and same[0] == counter.name:
        return same[1]  # the same string object: no digest of its text
    key = (counter.name, _digest(text))
    held = _STARTS.get(key)
    if held is None:
        held = _starts_of(encoding, text, _TOKENS.get(key))
        if held is None:
            return None
        _STARTS.put(key, held, 8 * len(held) + 64)
    _STARTS_BY_ID.put(text, (counter.name, held))
    return held


def _starts_of(encoding: Any, text: str, tokens: Sequence[int] | None = None) -> _Starts | None:
    """The offsets of ``text``'s tokens (``tokens``: what this process's encode of it
    gave, else it is encoded), none computed yet; ``None`` for a text with lone
    surrogates (its tokens would not spell it)."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return None
    if tokens is None:
        tokens = array("I", encoding.encode_ordinary(text))
    return _Starts(encoding, tokens, size == len(text))


_TOKENS: SizedMemo[tuple[str, bytes], Sequence[int]] = SizedMemo(1 << 23)
"""The tokens of messages' contents counted in this process (4 bytes a token, up to
8 M tokens), by digest: a content's first cut reads its offsets off them instead of
encoding it again."""


def count_cuttable(counter: TokenCounter, text: str) -> int:
    """:func:`count_small` for a text a prompt may show cut (a message's content): when
    it has to be encoded (remembered neither here nor on disk), its tokens are kept, so
    a later cut of it (:func:`cut_text`) finds its offsets without encoding it again."""
    encoding = getattr(counter, "encoding", None)
    if len(text) < _STARTS_MIN_CHARS or encoding is None or not getattr(counter, "exact", False):
        return count_small(counter, text)

    def encode_keeping(digest: bytes | None) -> int:
        tokens = array("I", encoding.encode_ordinary(text))
        if digest is not None:
            _TOKENS.put((counter.name, digest), tokens, 4 * len(tokens) + 64)
        return len(tokens)

    return _remembered_count(counter, text, encode_keeping)


_TOKEN_CHARS: dict[str, tuple[array[int], array[int], set[int]]] = {}
"""Per encoding, indexed by token: the characters it starts (:data:`_UNKNOWN` for a
token not met yet), and 1 when its first byte continues a character; then the set of
the tokens met that do (few: a pass asks whether a text has any in one C-speed call,
a third of a pass over the second array). Arrays: an
index is cheaper than a dict lookup (about 30% of an offsets pass), and unlike a
list of the vocabulary's size (200,000 entries) the garbage collector never walks
them (a list of that size made each of the next young collections take 2 ms). The
price: indexing an array costs more than a list, an offsets pass about 40% more."""

_UNKNOWN = 1 << 31
"""The characters of a token not met yet: more than all of any text's (a sum of
offsets that reaches it counted one such token; two overflow the offsets' array)."""

_CONTINUATION = bytes(int(0x80 <= b < 0xC0) for b in range(256))
"""Byte -> 1 for a UTF-8 continuation byte, else 0 (for ``bytes.translate``)."""


def _token_table(encoding: Any) -> tuple[array[int], array[int], set[int]]:
    """The encoding's per-token table (:data:`_TOKEN_CHARS`)."""
    table = _TOKEN_CHARS.get(encoding.name)
    if table is None:
        size = encoding.n_vocab
        table = _TOKEN_CHARS.setdefault(
            encoding.name, (array("I", [_UNKNOWN]) * size, array("B", [0]) * size, set())
        )
    return table


def _picked(table: array[int], tokens: Sequence[int]) -> Iterable[int]:
    """``table``'s entry for each of ``tokens``, by one C-speed call per
    :data:`_PICK` tokens (about a third of a ``map`` over the table's ``__getitem__``;
    a batch's tokens and entries are held at once, so a huge text is read in batches)."""
    n = len(tokens)
    if n <= 1:
        return [table[t] for t in tokens]
    if n <= _PICK:
        return operator.itemgetter(*tokens)(table)  # type: ignore[no-any-return]
    return itertools.chain.from_iterable(
        _picked(table, tokens[at : at + _PICK]) for at in range(0, n, _PICK)
    )


_PICK = 1 << 14
"""Tokens whose entries :func:`_picked` reads in one call (about 1 MB held at once)."""


def _learn(encoding: Any, tokens: Sequence[int]) -> None:
    """Fill the table for the tokens of ``tokens`` it does not know yet: the characters
    each starts (its bytes that are not UTF-8 continuation bytes), and 1 when it starts
    inside a character (its first byte is a continuation byte)."""
    leads, inside, starting_inside = _token_table(encoding)
    for token in {t for t in tokens if leads[t] == _UNKNOWN}:
        raw = encoding.decode_single_token_bytes(token)
        if raw and raw[0] >> 6 == 2:
            inside[token] = 1
            starting_inside.add(token)
        leads[token] = len(raw) - sum(raw.translate(_CONTINUATION))


def _from_starts(
    text: str,
    starts: _Starts,
    *,
    limit: int,
    notice_counted: tuple[str, int],
    counter: TokenCounter,
    keep_head: bool,
) -> Cut | None:
    """The cut (plus the notice: ``notice_counted``, its text and tokens) within
    ``limit``, its size read from token offsets and verified by one exact count (a few
    when a merge at the cut costs a token); ``None`` when verification keeps failing."""
    notice, notice_tokens = notice_counted
    n, m = len(text), len(starts)
    j = min(limit - notice_tokens - 1, m)
    for _ in range(4):
        if j <= 0:
            return None
        k = (starts[j] if j < m else n) if keep_head else n - starts[m - j]
        k = _snap(text, k, keep_head) if 0 < k < n else k
        if keep_head:
            kept = text[:k].rstrip("\n")
            joined = f"{kept}\n{notice}" if kept else notice
            split = _line_end(text, len(kept), starts, counter) or _head_split(
                text, len(kept), starts, counter
            )
            if split is None:
                tokens = counter.count(joined)
            else:
                cut = _counted_cut(joined, (len(kept) + 1, notice_tokens), split, counter)
                if cut.tokens <= limit:
                    return cut
                tokens = cut.tokens
        else:
            kept = text[n - k :].lstrip("\n")
            joined = f"{notice}\n{kept}" if kept else notice
            tokens = _tail_count(text, n - len(kept), starts, counter, joined)
        if tokens <= limit:
            return Cut(text=joined, tokens=tokens)
        j -= tokens - limit
    return None


def _line_end(
    text: str, end: int, starts: _Starts, counter: TokenCounter
) -> tuple[int, int] | None:
    """``(end, tokens before end)`` when ``text[:end]`` followed by a newline counts the
    tokens of ``text`` before ``end`` plus the newline's: a piece of ``text`` ends at
    ``end`` whatever follows (a piece starts there, or a newline follows a letter or
    digit) and the kept part ends in a letter or digit, which no piece joins to a
    newline (only punctuation takes newlines, and spaces before them). ``None``
    otherwise: the kept part's last piece is counted (:func:`_head_split`)."""
    if (
        counter.name in SPLITTABLE
        and 0 < end < len(text)
        and text[end - 1].isalnum()
        and (text[end] == "\n" or starts_piece(text, end, len(text)))
    ):
        return end, starts.tokens_before(end)
    return None


def _head_split(
    text: str, end: int, starts: _Starts, counter: TokenCounter
) -> tuple[int, int] | None:
    """The last piece start ``p`` of ``text[:end]`` (near its end) and the tokens before
    it, read from ``starts`` (the offsets of ``text``'s tokens); ``None`` when there is
    none near the end or the counter's pre-tokenizer is not known to split there."""
    if counter.name in SPLITTABLE:
        p = last_piece_start(text, end)
        if p is not None:
            return p, starts.tokens_before(p)
    return None


def _counted_cut(
    joined: str, notice: tuple[int, int], split: tuple[int, int], counter: TokenCounter
) -> Cut:
    """``joined`` (a kept start, a newline, the notice) counted from ``split`` (a piece
    start of the kept part and the tokens before it; ``notice``: where the notice
    starts in ``joined`` and its tokens). A newline before the notice's '[' always
    starts a new piece, so the notice (the same for every cut of one text: counted
    once) is counted apart from the kept part's last pieces, and a later count of the
    cut followed by other text (:func:`count_around`) counts only the notice and that
    text."""
    (p, before), (at, notice_tokens) = split, notice
    if 0 < at < len(joined) and starts_piece(joined, at, len(joined)):
        before += count_small(counter, joined[p:at])
        return Cut(joined, before + notice_tokens, at, before)
    return Cut(joined, before + counter.count(joined[p:]), p, before)


def _head_count(text: str, end: int, starts: _Starts, counter: TokenCounter, joined: str) -> int:
    """Exact count of ``joined``, which is ``text[:end]`` followed by other text: the
    tokens before the last piece start of ``text[:end]`` are read from ``starts`` (the
    offsets of ``text``'s tokens), only the rest is counted."""
    split = _head_split(text, end, starts, counter)
    if split is None:
        return counter.count(joined)
    return split[1] + counter.count(joined[split[0] :])


def count_followed(counter: TokenCounter, text: str, after: str) -> int:
    """Exact count of ``text + after`` from the count of ``text`` (remembered: a notice the
    fit counted) and of its last pieces: the pre-tokenizer starts a piece at the last
    place :func:`~personae.context._pieces.starts_piece` finds whatever follows, so only
    the text from there on is counted with ``after`` (a few characters: remembered too)."""
    if counter.name in SPLITTABLE and getattr(counter, "exact", False):
        n = _count_from_last_piece(counter, text, after, count_small)
        if n is not None:
            return n
    return count_small(counter, text + after)


def _count_from_last_piece(
    counter: TokenCounter, text: str, after: str, count: Callable[[TokenCounter, str], int]
) -> int | None:
    """Exact count of ``text + after``: ``count(counter, text)`` less the count of what
    follows its last piece start, plus that with ``after``; ``None`` when no piece
    starts near its end."""
    p = last_piece_start(text, len(text))
    if p is None:
        return None
    rest = text[p:]
    return count(counter, text) - count_small(counter, rest) + count_small(counter, rest + after)


def _head_tokens(counter: TokenCounter, head: str, text: str) -> int | None:
    """Tokens of ``head`` when ``text`` follows it and the pre-tokenizer starts a piece
    between them (a head ending in a newline before a letter or printable character;
    0 for no head); ``None`` when a piece may run over from one into the other."""
    if not head:
        return 0
    edge = head[-1] + text[:2]
    if head[-1] != "\n" or not starts_piece(edge, 1, len(edge)):
        return None
    return count_small(counter, head)


_AROUND_BY_ID: IdentityMemo[str, tuple[str, str, str, int | None]] = IdentityMemo(1024)
""":func:`count_text_around`'s last answer for a text object (with the counter's name,
the head and the tail): a whole output met again in a cut exchange (another budget
cuts the exchange elsewhere) is not counted again."""


def count_text_around(counter: TokenCounter, head: str, text: str, tail: str) -> int | None:
    """Exact count of ``head + text + tail`` from the count of ``text`` (counted when its
    message was prepared, see :func:`count_cuttable`) and of its last pieces: the
    tokens before its last piece start are its count less the count of what follows
    that start, so no offsets are needed. ``None`` when the pre-tokenizer may run a
    piece over from ``head`` into the text or no piece start is near the text's end
    (then count it whole)."""
    same = _AROUND_BY_ID.get(text)
    if same is not None and same[:3] == (counter.name, head, tail):
        return same[3]
    got = _count_text_around(counter, head, text, tail)
    _AROUND_BY_ID.put(text, (counter.name, head, tail, got))
    return got


def _count_text_around(counter: TokenCounter, head: str, text: str, tail: str) -> int | None:
    """:func:`count_text_around`, not remembered."""
    if counter.name not in SPLITTABLE or not getattr(counter, "exact", False):
        return None
    n = _head_tokens(counter, head, text)
    if n is None:
        return None
    body = _count_from_last_piece(counter, text, tail, count_cuttable)
    return None if body is None else n + body


def count_around(counter: TokenCounter, head: str, cut: Cut, tail: str) -> int | None:
    """Exact count of ``head + cut.text + tail`` without counting the cut text's start
    again: the head's count, plus the tokens before the cut's piece start (read off its
    offsets), plus the count of the rest. ``None`` when the cut has no such start or the
    pre-tokenizer may run a piece over from ``head`` into the cut text (only a head
    ending in a newline before a letter or printable character is known not to)."""
    if not cut.split or counter.name not in SPLITTABLE or not getattr(counter, "exact", False):
        return None
    n = _head_tokens(counter, head, cut.text)
    if n is None:
        return None
    return n + cut.before + count_small(counter, cut.text[cut.split :] + tail)


def _tail_count(text: str, begin: int, starts: _Starts, counter: TokenCounter, joined: str) -> int:
    """Exact count of ``joined``, which is other text followed by ``text[begin:]``: the
    tokens from the first piece start of ``text[begin:]`` on are read from ``starts``."""
    n = len(text)
    if counter.name in SPLITTABLE:
        for p in range(begin + 1, min(n, begin + SPLIT_SCAN)):
            if starts_piece(text, p, n):
                head = counter.count(joined[: len(joined) - n + p])
                return head + len(starts) - starts.tokens_before(p)
    return counter.count(joined)


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


def outline_cut(text: str, limit: int, counter: TokenCounter, note: str) -> Cut | None:
    """The first lines of ``text`` in full, the rest outlined, then ``note``: at most ``limit``.

    Keeping ``j`` lines whole and outlining the others grows almost
    monotonically with ``j`` (from the pure outline at 0 to the whole text),
    so the largest ``j`` that fits is found by the same interpolation search as
    a plain cut. Returns ``None`` when not even the outline and the note fit.
    """
    lines = text.splitlines(keepends=True)
    n = len(lines)

    def form(j: int) -> str:
        head = "".join(lines[:j]).rstrip("\n")
        rest = outline("".join(lines[j:]))
        body = f"{head}\n{rest}" if head and rest else head or rest
        return f"{body}\n{note}" if body else note

    def measure(j: int) -> int:
        return counter.count(form(j)) - base

    base = counter.count(form(0))
    if base > limit:
        return None
    total = counter.count(text)
    guess = int(n * (limit - base) / max(1, total - base)) if total > base else n
    j = _largest(n, max(1, guess), measure, limit - base) if n else 0
    while True:
        joined = form(j)
        tokens = counter.count(joined)
        if tokens <= limit or j == 0:
            break
        j -= 1
    if tokens > limit:
        return None
    if j < n and limit - tokens > 8:
        # Whole lines are coarse (a long paragraph is one line): the room left takes
        # the start of the next line, so the budget is used and the form stays smaller
        # than the text.
        filled = _fill_line(lines, j, limit, counter, note)
        if filled is not None and tokens < filled.tokens <= limit:
            return filled
    return Cut(text=joined, tokens=tokens)


def _fill_line(
    lines: list[str], j: int, limit: int, counter: TokenCounter, note: str
) -> Cut | None:
    """Lines before ``j`` whole, the start of line ``j`` (marked ``…``), the rest outlined."""
    head = "".join(lines[:j])
    line = lines[j].rstrip("\n")
    rest = outline("".join(lines[j + 1 :]))

    def form(k: int) -> str:
        body = f"{head}{line[:k].rstrip()} …"
        return f"{body}\n{rest}\n{note}" if rest else f"{body}\n{note}"

    base = counter.count(form(0))
    if base > limit or not line:
        return None
    k = _largest(len(line), len(line) // 2, lambda k: counter.count(form(k)) - base, limit - base)
    while k > 0:
        text = form(k)
        tokens = counter.count(text)
        if tokens <= limit:
            return Cut(text=text, tokens=tokens)
        k -= max(1, k // 16)
    return None
