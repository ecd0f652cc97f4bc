"""The process's last fresh snapshot, reused while nothing it was built from changed.

A snapshot built without ``options`` and ``window`` (a server assembling per request,
a process per turn) gets a fresh window and depends on nothing but its arguments, the
project files and the messages, when it reads no store, runs no ``!command``, reads no
git log and calls no summarizer (``_Built.static``). The next such build with equal
arguments, whose root still resolves to the same directory and whose project files
are unchanged (the checks a fresh build makes: stats of the root and of every path
read), gets a copy of it with its own dicts and a fresh window:

- when its messages are the same: the same snapshot;
- when they are the same followed by more (an agent loop's next turn): the same but
  for the messages and the id, which hashes only the new messages on from the hash
  state the previous id left.

Messages are the same when the given ones are the chat messages held, object by
object (a chat message is immutable), or convert to equal ones (a dict changed in
place converts to a different message). Arguments are equal when they are the same
objects, or equal strings, numbers, tuples or lists (a caller may change a list it
passes again).
"""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TypeVar

from personae.context._probe import current
from personae.context.messages import ChatMessage
from personae.context.window import ContextWindow, as_chat, feed_digest

__all__ = ["keep", "reuse"]


class _Snapshot(Protocol):
    """What this module reads of a snapshot (``personae.context.snapshot`` imports this
    module, so it is not imported back, not even for types)."""

    @property
    def messages(self) -> tuple[ChatMessage, ...]: ...
    @property
    def window(self) -> ContextWindow | None: ...


S = TypeVar("S", bound=_Snapshot)


class _Build(Protocol):
    """What this module reads of a build in progress (the snapshot module's ``_Built``)."""

    @property
    def chat(self) -> tuple[ChatMessage, ...] | None: ...
    @property
    def base(self) -> Path: ...
    @property
    def files_key(self) -> Hashable: ...
    @property
    def files(self) -> object: ...
    @property
    def head_state(self) -> Any: ...


class _Fresh(NamedTuple):
    """The last fresh snapshot fit to be reused and what it was built from."""

    cls: type[Any]
    fields: dict[str, Any]
    """The keyword arguments but ``messages``; lists as tuples (compared by value)."""
    chat: tuple[ChatMessage, ...] | None
    """The messages given, as chat messages (``None``: none given)."""
    base: Path
    files_key: Hashable
    files: object
    """The project files read (the same object while none of them changed)."""
    values: dict[str, Any]
    """The snapshot's attributes (its dicts copied, no window)."""
    head_state: Any
    """The id's hash state before the messages."""
    messages_state: Any
    """The hash state over the messages (``None``: none)."""


_LAST: list[_Fresh] = []
"""The last fresh build fit to be reused (one: a server assembles one conversation per
request, for each role and retry, and the next request adds to it)."""
_BY_VALUE = (str, int, float, tuple)


def _same_fields(held: dict[str, Any], fields: dict[str, Any]) -> bool:
    """True when ``fields`` (but ``messages``) are the ones ``held``."""
    if len(held) != len(fields) - ("messages" in fields):
        return False
    for k, v in fields.items():
        if k == "messages":
            continue
        h = held.get(k, held)
        if v is h:
            continue
        value = tuple(v) if type(v) is list else v
        if type(value) not in _BY_VALUE or type(h) is not type(value) or value != h:
            return False
    return True


def keep(cls: type[S], fields: dict[str, Any], built: _Build, snapshot: S) -> None:
    """Hold ``snapshot``, just built by a fresh static build from ``fields``."""
    values = dict(vars(snapshot))
    for name in ("texts", "files", "profile_texts"):
        values[name] = dict(values[name])
    values["window"] = None
    window = snapshot.window
    state = window.digest_state() if snapshot.messages and window is not None else None
    held = {k: tuple(v) if type(v) is list else v for k, v in fields.items() if k != "messages"}
    _LAST[:] = [
        _Fresh(
            cls, held, built.chat, built.base, built.files_key, built.files, values,
            built.head_state, state,
        )
    ]  # fmt: skip


def _messages(
    given: object, held: tuple[ChatMessage, ...] | None
) -> tuple[bool, tuple[ChatMessage, ...] | None, tuple[ChatMessage, ...]]:
    """Whether ``given`` are the ``held`` messages followed by zero or more others; the
    given ones as chat messages (if converted) and the others."""
    if given is None or held is None:
        return given is None and held is None, None, ()
    assert isinstance(given, list | tuple)
    k = len(held)
    if len(given) < k or (not k and given):  # fewer, or a history where there was none
        return False, None, ()
    if (given if type(given) is tuple and len(given) == k else tuple(given[:k])) == held:
        # The first k are the held messages (the same objects: one C-speed comparison
        # that checks identity first; equal messages are as good).
        more = as_chat(given[k:]) if len(given) > k else ()
        return True, held + more if more else held, more
    chat = as_chat(given)
    if chat[:k] != held:
        return False, chat, ()
    return True, chat, chat[k:]


def reuse(
    cls: type[S], root: Path | str, fields: dict[str, Any]
) -> tuple[S | None, tuple[ChatMessage, ...] | None]:
    """A copy of the last fresh snapshot, with more messages if ``fields`` has more,
    when a fresh build with ``fields`` would give it; else ``None``, and the messages
    as chat messages if they were converted here."""
    given = fields.get("messages")
    if given is not None and type(given) not in (list, tuple):
        return None, None  # an iterable is read once, by the build
    last = _LAST[0] if _LAST else None
    if last is None or last.cls is not cls or not _same_fields(last.fields, fields):
        return None, None
    same, chat, more = _messages(given, last.chat)
    if not same:
        return None, chat
    window = ContextWindow(shared=True)
    base = window.resolve(root)
    if (base is not last.base and base != last.base) or current(
        window.files, last.files_key
    ) is not last.files:
        return None, chat
    values = last.values
    if more:
        state = last.messages_state.copy()
        feed_digest(state, more)
        head = last.head_state.copy()
        head.update(state.digest())
        values = {**values, "id": head.hexdigest()[:16]}
        _LAST[:] = [last._replace(chat=chat, values=values, messages_state=state)]
    snapshot = object.__new__(cls)  # the attributes a build sets, as they were
    vars(snapshot).update(
        values,
        texts=dict(values["texts"]),
        files=dict(values["files"]),
        profile_texts=dict(values["profile_texts"]),
        messages=window.sync(chat) if chat else (),
        window=window,
    )
    return snapshot, chat
