"""A session's context window: what earlier turns of one conversation prepared, reused.

An agent loop appends a few messages per turn. A :class:`ContextWindow` is
the per-session object the loop keeps (pass it to every
``Snapshot.build(..., window=...)`` of the session): it holds the
conversation's messages, their running digest, each message's escaped form
and rendered cost, each exchange rendered once, the running totals the
fitter bisects, the first message the previous prompt kept (eviction
hysteresis), and the project files and store rows read for the session.
A turn prepares only what is new:

- messages appended with :meth:`ContextWindow.extend` are taken as they
  are (no comparison with what the window holds);
- a whole list given again (``messages=`` or the store's newest rows) is
  compared with what the window holds (identity first, at C speed) and
  only the part after the common prefix is prepared.

A snapshot built without a window gets a fresh one that holds no cut points and no
hints: what it shares with earlier fresh windows of the process is only what depends
on nothing but content (the preparation of the same messages, counted and escaped
for the same counter and tags; their digest; project file reads whose files are
unchanged), so its prompt is the one prepared from nothing. A window is for one
conversation; its methods take a lock, so threads assembling several roles
of one snapshot may share it.
"""

from __future__ import annotations

import hashlib
import operator
import os
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from personae.context.history import Exchanges, MessageCosts, render_unit
from personae.context.messages import ChatMessage, Unit, from_stored, group_units_at

__all__ = ["ContextWindow", "as_chat", "common_prefix", "exchanges_of", "feed_digest"]

T = TypeVar("T")

_SHARED_FILES: dict[Hashable, Any] = {}
"""Project file reads of the windows that share (see ``_probe.remembered``: each read
is returned again only while no file it consulted changed)."""

_SHARED_CONTENTS: OrderedDict[Hashable, Any] = OrderedDict()
"""Text sections escaped and counted by the windows that share (see ``contents``)."""

_SHARED_ROOTS: dict[str, tuple[Path, tuple[int, int], tuple[int, int], bool]] = {}
"""Project roots the windows that share resolved, with the identity (device, inode) of
the given path and of the resolved one (and whether the path was its own resolution):
a root is resolved again when either changed."""
_SHARED_ROOTS_MAX = 64

_MAX_HINTS = 256
"""Hints kept per window (one per counter, profile, role and budget)."""


def as_chat(messages: Iterable[object]) -> tuple[ChatMessage, ...]:
    """The messages as :class:`ChatMessage` (stored rows and dicts converted)."""
    seq = messages if isinstance(messages, Sequence) else list(messages)
    kinds = set(map(type, seq))  # C-speed: a long list of ChatMessage is common
    if kinds <= {ChatMessage}:
        chat: Sequence[ChatMessage] = seq  # type: ignore[assignment]
        return chat if isinstance(chat, tuple) else tuple(chat)
    return tuple(from_stored(m) for m in seq)


def _same(a: ChatMessage, b: ChatMessage) -> bool:
    return a is b or (
        a.seq == b.seq
        and a.role == b.role
        and a.tool_call_id == b.tool_call_id
        and a.content == b.content
        and a.tool_calls == b.tool_calls
    )


def common_prefix(old: Sequence[ChatMessage], new: Sequence[ChatMessage]) -> int:
    """How many leading messages ``old`` and ``new`` share."""
    n = min(len(old), len(new))
    # C-speed: tuple equality checks identity first, so the same messages compare in a
    # plain loop of pointer tests (equal messages that are not the same objects also pass).
    if tuple(old[:n]) == tuple(new[:n]):
        return n
    for i in range(n):
        if not _same(old[i], new[i]):
            return i
    return n


def _feed(state: Any, m: ChatMessage) -> None:
    state.update(f"\x00{m.seq}\x00{m.role}\x00{m.tool_call_id}\x00".encode())
    for c in m.tool_calls:
        state.update(f"{c.id}\x01{c.name}\x01{c.arguments}\x01".encode())
    state.update(m.content.encode("utf-8", "surrogatepass"))


def feed_digest(state: Any, messages: Iterable[ChatMessage]) -> None:
    """Feed ``messages`` to a running hash state as :meth:`ContextWindow.digest` does."""
    for m in messages:
        _feed(state, m)


def exchanges_of(messages: Sequence[ChatMessage], costs_of: MessageCosts) -> tuple[Exchanges, int]:
    """Escaped exchanges prepared for fitting from scratch, and the dropped count."""
    prepared = costs_of.prepare_many(messages)
    units, dropped, _, _ = group_units_at([p[0] for p in prepared])
    cost_by_msg = {id(p[0]): p[1] for p in prepared}
    costs = tuple(_unit_costs(u, cost_by_msg, costs_of) for u in units)
    return Exchanges.of(units, costs, costs_of.sep), dropped


def _unit_costs(unit: Unit, cost_by_msg: dict[int, int], costs_of: MessageCosts) -> tuple[int, ...]:
    """Each message's cost in ``unit``: the prepared one, or prepared now (a notice the
    grouping added)."""
    return tuple(
        cost_by_msg[id(m)] if id(m) in cost_by_msg else costs_of.prepare(m)[1]
        for m in unit.messages
    )


@dataclass
class _Prepared:
    """One counter's and tag set's preparation of the window's messages."""

    generation: int
    last: tuple[Exchanges, int] | None = None
    shared: _Prepared | None = None
    """A preparation published by another window (:data:`_SHARED`), read until this
    one extends it (its lists are copied then: a published one never changes)."""
    prepared: list[tuple[ChatMessage, int]] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)
    costs: list[tuple[int, ...]] = field(default_factory=list)
    blocks: list[str] = field(default_factory=list)
    heads: list[int] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    before: list[int] = field(default_factory=list)
    cum_cost: list[int] = field(default_factory=lambda: [0])
    cum_msgs: list[int] = field(default_factory=lambda: [0])

    @property
    def done(self) -> int:
        """Messages of the window prepared so far."""
        return len(self.shared.prepared if self.shared is not None else self.prepared)

    def frozen(self) -> _Prepared:
        """A copy to publish (lists copied: this one goes on changing)."""
        src = self.shared if self.shared is not None else self
        return _Prepared(-1, self.last, None, *(list(getattr(src, f)) for f in _LISTS))

    def _own(self) -> None:
        """Copy the published lists this preparation reads before changing them."""
        if self.shared is not None:
            for f in _LISTS:
                setattr(self, f, list(getattr(self.shared, f)))
            self.shared = None

    def pop_last(self) -> tuple[Unit, str] | None:
        """Take the last exchange off (it may still grow) and return it with its block."""
        if not self.units:
            return None
        got = self.units.pop(), self.blocks.pop()
        del self.costs[-1], self.heads[-1], self.starts[-1], self.before[-1]
        del self.cum_cost[-1], self.cum_msgs[-1]
        return got

    def extend(self, new: Sequence[ChatMessage], costs_of: MessageCosts) -> tuple[Exchanges, int]:
        """Prepare ``new`` (appended after what is done) and regroup from the last exchange."""
        self._own()
        self.prepared.extend(costs_of.prepare_many(new))
        # Exchanges before the last one are final; regroup from the last one's head.
        restart = self.starts[-1] if self.units else 0
        base = self.before[-1] if self.units else 0
        previous = self.pop_last()
        sep = costs_of.sep
        tail = self.prepared[restart:]
        units, dropped, starts, before = group_units_at([p[0] for p in tail])
        cost_by_msg = {id(p[0]): p[1] for p in tail}
        for u, s, b in zip(units, starts, before, strict=True):
            costs = _unit_costs(u, cost_by_msg, costs_of)
            self.units.append(u)
            self.costs.append(costs)
            self.blocks.append(_block(u, previous))
            self.heads.append(u.head.seq)
            self.starts.append(restart + s)
            self.before.append(base + b)
            self.cum_cost.append(self.cum_cost[-1] + sum(costs) + sep * len(u.messages))
            self.cum_msgs.append(self.cum_msgs[-1] + len(u.messages))
        ex = Exchanges(
            tuple(self.units),
            tuple(self.costs),
            tuple(self.cum_cost),
            tuple(self.cum_msgs),
            tuple(self.blocks),
            sep,
            tuple(self.heads),
        )
        self.last = (ex, base + dropped)
        return self.last


_LISTS = (
    "prepared", "units", "costs", "blocks", "heads", "starts", "before", "cum_cost", "cum_msgs",
)  # fmt: skip

_SHARED_MAX = 4
"""Preparations (and digests) published per counter and tag set: the conversations a
process assembled last."""
_SHARED: dict[Hashable, list[tuple[tuple[ChatMessage, ...], _Prepared]]] = {}
"""Per counter and tag set, the preparations of the conversations this process
prepared last (most recent last), by their messages: a fresh window (a snapshot
built without one: a server assembling per request) starts from the one whose
messages begin its own, and prepares only the rest. A preparation depends on
nothing but the messages, the counter and the tags."""
_SHARED_DIGESTS: list[tuple[tuple[ChatMessage, ...], Any]] = []
"""The running digests of those conversations (hash states), the same way."""
_SHARED_LOCK = threading.Lock()


def _longest(
    entries: list[tuple[tuple[ChatMessage, ...], T]], msgs: Sequence[ChatMessage]
) -> tuple[int, T] | None:
    """The entry whose messages are the longest prefix of ``msgs`` (and its length)."""
    best: tuple[int, T] | None = None
    for held, value in entries:
        if held is msgs and held:  # the same tuple (a fresh snapshot reused): the longest
            return len(held), value
        n = len(held)
        if n > len(msgs) or (best is not None and n <= best[0]) or not n:
            continue
        last = msgs[n - 1]
        if (held[-1] is last or held[-1] == last) and common_prefix(held, msgs[:n]) == n:
            best = (n, value)
    return best


def _publish(
    entries: list[tuple[tuple[ChatMessage, ...], T]], msgs: tuple[ChatMessage, ...], value: T
) -> None:
    """Hold ``value`` for ``msgs`` (replacing an entry for a prefix of them)."""
    with _SHARED_LOCK:
        for i, (held, _) in enumerate(entries):
            if len(held) <= len(msgs) and held == msgs[: len(held)]:
                del entries[i]
                break
        entries.append((msgs, value))
        if len(entries) > _SHARED_MAX:
            del entries[0]


def _realpath(key: str) -> Path:
    return Path(os.path.realpath(key))


def _dev_ino(where: str) -> tuple[int, int] | None:
    try:
        st = os.stat(where)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _shared_root(key: str) -> Path:
    """``key`` resolved (see :meth:`ContextWindow.resolve`): the process's earlier
    resolution when ``key`` is absolute and it and that resolution are still the same
    directory (a relative key depends on the working directory: resolved each time)."""
    held = _SHARED_ROOTS.get(key)
    if held is not None:
        now = _dev_ino(key)
        # A key that was its own resolution (no link in it) and is still the same
        # directory resolves to it again: one stat.
        if now == held[1] and (held[3] or _dev_ino(str(held[0])) == held[2]):
            return held[0]
    path = _realpath(key)
    given, resolved = _dev_ino(key), _dev_ino(str(path))
    if os.path.isabs(key) and given is not None and given == resolved:
        if len(_SHARED_ROOTS) >= _SHARED_ROOTS_MAX:
            _SHARED_ROOTS.clear()
        _SHARED_ROOTS[key] = (path, given, resolved, str(path) == key)
    return path


def _block(unit: Unit, previous: tuple[Unit, str] | None) -> str:
    """The unit rendered, reusing the previous rendering of the same messages."""
    if previous is not None:
        old = previous[0].messages
        if len(old) == len(unit.messages) and all(map(operator.is_, old, unit.messages)):
            return previous[1]
    return render_unit(unit)


class ContextWindow:
    """The in-process state of one conversation, kept by its agent loop across turns.

    Create one per session and pass it to each ``Snapshot.build(...,
    window=...)``; append each turn's new messages with :meth:`extend` (or
    give the whole list, or a store session, to ``Snapshot.build``).

    How results relate to a from-scratch build: the snapshot (id, texts,
    messages) is the same, and so is every assembled section but the
    conversation (and the cut warning that names it). The conversation differs
    only where it starts: at a budget and profile the window assembled before,
    it keeps the previous prompt's first exchange while the exchanges from there
    still fit, and on overflow evicts a batch down to ``low_water``; a build
    from scratch starts at a point of its cut grid (``cut_step``: the first grid
    point that fits, the exchange it falls in shortened to the part after it).
    At a budget the window has not assembled for, the prompt is byte-identical
    to the from-scratch one. Between two evictions the previous prompt is the
    next one's prefix (up to its last message); an eviction goes down to
    ``low_water`` of the room, where a from-scratch build fills it up to about one
    grid step. Both paths trade prefix share for unused budget on one frontier
    (docs/context.md, "Prefix share and unused budget").
    """

    def __init__(self, messages: Iterable[object] = (), *, shared: bool = False) -> None:
        """``shared``: start from what this process prepared for the same messages
        before (a snapshot built without a window gets such a one): prepared
        messages, exchanges and digest, and project file reads (checked unchanged)."""
        self._shared = shared
        self._lock = threading.RLock()
        self._msgs: list[ChatMessage] = [] if messages == () else list(as_chat(messages))
        self._tuple: tuple[ChatMessage, ...] | None = None
        self._generation = 0
        """Bumped whenever messages are taken back (what was prepared is dropped)."""
        self._sha: Any = None
        """The running digest (made on first use)."""
        self._fed = 0
        self._sha_generation = 0
        self._prepared: dict[Hashable, _Prepared] = {}
        self._hints: dict[Hashable, tuple[str, int | None, int | None]] = {}
        self.files: dict[Hashable, Any] = _SHARED_FILES if shared else {}
        """Project file reads of this session (see ``_probe.remembered``)."""
        self.store_reads: dict[Hashable, Any] = {}
        """The session's store rows read by earlier turns (see ``_conversation``)."""
        self.head: tuple[Hashable, Any] | None = None
        """The previous snapshot's head (texts, paths...) and its hash state."""
        self.built: Any = None
        """The previous snapshot and what it was built from (see ``Snapshot.build``)."""
        self.options: tuple[dict[str, Any], Any] | None = None
        """The previous build's keyword arguments and the options made of them."""
        self.contents: OrderedDict[Hashable, Any] = _SHARED_CONTENTS if shared else OrderedDict()
        """Text sections escaped and counted by earlier assemblies (see ``assemble``:
        found by the identity of the spec and texts, so windows that share share them)."""
        self._roots: dict[str, Path] = {}

    @property
    def shares(self) -> bool:
        """True for a fresh window that starts from what the process prepared before."""
        return self._shared

    def resolve(self, root: os.PathLike[str] | str) -> Path:
        """The project root, symlinks resolved once per window (a session's root is fixed).

        A window that shares reuses the resolution of an earlier one while the given
        path and the resolved one still name the same directory (two stats instead of
        a walk over every component)."""
        key = os.fspath(root)
        got = self._roots.get(key)
        if got is None:
            got = self._roots[key] = _shared_root(key) if self._shared else _realpath(key)
        return got

    def __len__(self) -> int:
        return len(self._msgs)

    def extend(self, messages: Iterable[object]) -> None:
        """Append messages that follow the ones the window holds (cost: the new ones)."""
        new = as_chat(messages)
        if new:
            with self._lock:
                self._msgs.extend(new)
                self._tuple = None

    @property
    def messages(self) -> tuple[ChatMessage, ...]:
        """The conversation the window holds, oldest first."""
        with self._lock:
            if self._tuple is None:
                self._tuple = tuple(self._msgs)
            return self._tuple

    def sync(self, messages: Sequence[ChatMessage]) -> tuple[ChatMessage, ...]:
        """Hold exactly ``messages`` from now on (what they share with the window is kept)."""
        with self._lock:
            if messages is self._tuple:
                return self._tuple
            if not self._msgs and type(messages) is tuple:  # a fresh window
                self._msgs.extend(messages)
                self._tuple = messages
                return messages
            k = common_prefix(self._msgs, messages)
            if k == len(self._msgs) == len(messages) and self._tuple is not None:
                return self._tuple  # the same messages again
            if k < len(self._msgs):
                del self._msgs[k:]
                self._generation += 1
            self._msgs.extend(messages[k:])
            # The window's own objects for the shared part (equal messages read again from
            # the store are not the same objects): what it prepared stays tied to them.
            self._tuple = tuple(self._msgs)
            return self._tuple

    def digest(self) -> bytes:
        """SHA-256 over the window's messages (as if hashed from scratch)."""
        with self._lock:
            if self._sha is None or self._sha_generation != self._generation:
                self._sha, self._fed, self._sha_generation = (
                    hashlib.sha256(),
                    0,
                    self._generation,
                )
            if self._fed == 0 and self._shared and self._msgs:
                got = _longest(_SHARED_DIGESTS, self.messages)
                if got is not None:
                    self._fed, sha = got
                    self._sha = sha.copy()
            fed = self._fed
            for m in self._msgs[fed:]:
                _feed(self._sha, m)
            self._fed = len(self._msgs)
            if self._shared and self._fed > fed:
                _publish(_SHARED_DIGESTS, self.messages, self._sha.copy())
            out: bytes = self._sha.copy().digest()
            return out

    def digest_state(self) -> Any:
        """A copy of the hash state :meth:`digest` finishes (fed every message held)."""
        with self._lock:
            self.digest()
            return self._sha.copy()

    def exchanges(
        self, messages: Sequence[ChatMessage], costs_of: MessageCosts
    ) -> tuple[Exchanges, int]:
        """``messages`` prepared for fitting (as :func:`exchanges_of`), preparing only
        what the window has not prepared for this counter and tag set yet."""
        with self._lock:
            self.sync(messages)
            key = (costs_of.counter.name, costs_of.tags)
            prep = self._prepared.get(key)
            if prep is None or prep.generation != self._generation:
                prep = self._prepared[key] = _Prepared(self._generation)
                got = _longest(_SHARED.get(key, []), self.messages) if self._shared else None
                if got is not None:
                    prep.shared, prep.last = got[1], got[1].last
            if prep.last is not None and prep.done == len(self._msgs):
                return prep.last
            done = prep.extend(self._msgs[prep.done :], costs_of)
            if self._shared:
                with _SHARED_LOCK:
                    entries = _SHARED.setdefault(key, [])
                _publish(entries, self.messages, prep.frozen())
            return done

    def kept_from(self, key: Hashable, snapshot_id: str) -> int | None:
        """Seq of the first message the previous prompt under ``key`` kept (``None``: none).

        The same snapshot assembled again gets the hint its first assembly got, so
        repeating an assembly repeats its output byte for byte.
        """
        got = self._hints.get(key)
        if got is None:
            return None
        return got[1] if got[0] == snapshot_id else got[2]

    def remember_kept_from(
        self, key: Hashable, snapshot_id: str, used: int | None, seq: int | None
    ) -> None:
        """Record the hint ``used`` for ``snapshot_id`` and the first message it kept."""
        with self._lock:
            self._hints.pop(key, None)  # to the end: the hints are kept in order of use
            if len(self._hints) >= _MAX_HINTS:  # rare: far more budgets than a session uses
                del self._hints[next(iter(self._hints))]  # the least recently used
            self._hints[key] = (snapshot_id, used, seq)
