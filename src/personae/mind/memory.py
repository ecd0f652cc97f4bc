"""Memory files: Markdown with frontmatter (name, description, type) in one folder.

``MEMORY.md`` is the index (one line per memory), kept by personae: it and
the other reserved names are never written through the tools. Names are plain
file names (no folders), confined to the memory directory; writes are atomic
(temp file + ``os.replace``) under a folder lock, keep the index current and
leave no temp or lock file behind. The folder is private (0700), files 0600.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from stat import S_ISREG
from typing import Any, NamedTuple

from filelock import Timeout

from personae.errors import UsageError
from personae.fsutil import locked, private_dir, read_regular, remove_stale_temps, write_atomic
from personae.layout import DIR_NAME
from personae.mind._frontmatter import FrontmatterError, split_frontmatter
from personae.security.redact import redact_text

__all__ = [
    "INDEX_NAME",
    "LOCK_NAME",
    "REQUIRED_FIELDS",
    "RESERVED_NAMES",
    "MemoryDir",
    "MemoryEntry",
    "MemoryFileError",
    "parse_memory",
]

INDEX_NAME = "MEMORY.md"
"""The index file of a memory directory."""

RESERVED_NAMES = frozenset({"memory.md", "claude.md", "agents.md", "gemini.md", "mind.md"})
"""File names (case-folded) the mind tools never write."""
LOCK_NAME = ".memory.lock"
"""The folder lock every writer holds (removed on release)."""

REQUIRED_FIELDS = ("name", "description", "type")
"""Frontmatter fields every written memory file must have."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,124}\.md$")
_SCANDIR_FD = os.scandir in os.supports_fd
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_MAX_BYTES = 512_000


class MemoryFileError(UsageError):
    """A bad memory file name or content."""


class MemoryEntry(NamedTuple):
    """One parsed memory file."""

    name: str
    title: str
    description: str
    type: str
    body: str
    facets: tuple[tuple[str, str], ...] = ()
    error: str | None = None


def parse_memory(name: str, text: str) -> MemoryEntry:
    """Parse a memory file's text; a broken header gives type ``unknown`` and ``error``.

    Secrets are redacted first (``personae.security.redact``): nothing parsed
    from a memory file reaches the store, a packet or a prompt verbatim.
    """
    text = redact_text(text)
    try:
        meta, body, _had = split_frontmatter(text)
    except FrontmatterError as exc:
        return MemoryEntry(name, name, "", "unknown", text, (), str(exc))
    default_type = "index" if name == INDEX_NAME else "unknown"
    mtype = (_scalar(meta.get("type")) or default_type).lower()
    title = _scalar(meta.get("name")) or name.removesuffix(".md")
    description = _scalar(meta.get("description")) or ""
    facets: list[tuple[str, str]] = [("type", mtype)]
    for key, value in meta.items():
        lowered = key.lower()
        if lowered in {"type", "description", "name"}:
            continue  # type is added above; name and description are searched as text
        for item in value if isinstance(value, list) else (value,):
            text_value = item.strip() if isinstance(item, str) else _scalar(item)
            if text_value and len(text_value) <= 200:
                facets.append((lowered, text_value.lower()))
    return MemoryEntry(name, title, description, mtype, body, tuple(facets))


def _scalar(value: Any) -> str | None:
    if isinstance(value, str):
        return value.strip() or None
    if value is None or isinstance(value, dict | list):
        return None
    return str(value).strip() or None


class MemoryDir:
    """A folder of memory files."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._valid: dict[str, bool] = {}

    @property
    def key(self) -> str:
        """The resolved folder path, used as the catalog key in the store."""
        return str(self.root)

    def exists(self) -> bool:
        """True when the folder exists."""
        return self.root.is_dir()

    def path_of(self, name: str) -> Path:
        """The path of memory ``name``, refusing anything outside the folder."""
        if not isinstance(name, str) or not _NAME.match(name):
            raise MemoryFileError(
                f"invalid memory file name {name!r}: use a plain name like 'user_prefs.md' "
                "(letters, digits, '.', '_', '-'; ending in .md; no folders)",
                field="name",
            )
        path = self.root / name
        resolved = path.resolve()
        if resolved.parent != self.root:
            raise MemoryFileError(f"{name}: resolves outside the memory directory", field="name")
        return path

    def make_private(self) -> None:
        """Create the folder 0700; tighten an existing one only when it is personae's own.

        An existing folder is made 0700 when it lies in a ``.personae`` folder
        (the default ``.personae/memory``); a folder pointed at elsewhere (a
        project root, a home folder) keeps its mode.
        """
        if not self.root.exists() or DIR_NAME in self.root.parts:
            private_dir(self.root)

    def scan(self) -> dict[str, tuple[int, int]]:
        """``{name: (mtime_ns, size)}`` of the Markdown files in the folder.

        Every file is stat'ed on every scan (an edit in place does not change the
        folder's mtime). Where supported the folder is listed through a descriptor,
        so each stat resolves one name instead of the whole path.
        """
        found: dict[str, tuple[int, int]] = {}
        root = str(self.root)
        fd: int | None = None
        try:
            if _SCANDIR_FD:
                fd = os.open(root, os.O_RDONLY | _O_DIRECTORY)
            entries = os.scandir(root if fd is None else fd)
        except OSError:  # missing, not a folder, unreadable: an empty catalog
            if fd is not None:
                os.close(fd)
            return found
        valid = self._valid
        try:
            with entries:
                for entry in entries:
                    name = entry.name
                    ok = valid.get(name)
                    if ok is None:
                        ok = valid[name] = bool(name.endswith(".md") and _NAME.match(name))
                    if not ok:
                        continue
                    try:
                        if entry.is_symlink() and not self._link_inside(name):
                            continue
                        st = entry.stat()
                    except OSError:
                        continue
                    if S_ISREG(st.st_mode):
                        found[name] = (st.st_mtime_ns, st.st_size)
        finally:
            if fd is not None:
                os.close(fd)
        return found

    def _link_inside(self, name: str) -> bool:
        """Whether the symlink ``name`` resolves to a file directly in the folder."""
        return (self.root / name).resolve().parent == self.root

    def read(self, name: str) -> str:
        """The text of memory ``name``."""
        path = self.path_of(name)
        try:
            return read_regular(path, max_bytes=_MAX_BYTES).decode("utf-8")
        except FileNotFoundError:
            raise MemoryFileError(f"no memory file named {name!r}", field="name") from None
        except UnicodeDecodeError:
            raise MemoryFileError(f"{name}: not UTF-8 text", file=path) from None
        except OSError as exc:  # a FIFO or device is refused, never waited on
            raise MemoryFileError(f"{name}: cannot read: {exc.strerror}", file=path) from None

    def write(self, name: str, content: str) -> MemoryEntry:
        """Validate and atomically write memory ``name``; update ``MEMORY.md``.

        Reserved names (the index ``MEMORY.md``, host instruction files) are
        refused: personae keeps the index itself.
        """
        path = self.path_of(name)
        if name.casefold() in RESERVED_NAMES:
            raise MemoryFileError(
                f"{name} is reserved (personae keeps {INDEX_NAME} itself); "
                "write a memory file such as 'user_prefs.md' and the index follows",
                field="name",
            )
        if len(content.encode("utf-8")) > _MAX_BYTES:
            raise MemoryFileError(f"{name}: content larger than {_MAX_BYTES} bytes")
        entry = parse_memory(name, content)
        _validate(name, content, entry)
        try:
            self.make_private()
            with locked(self.root / LOCK_NAME, timeout=10):
                # Every writer holds this lock: a temp file here is a killed writer's leftover.
                remove_stale_temps(self.root)
                _atomic_write(path, content)
                self._update_index(entry)
        except Timeout:
            raise MemoryFileError(
                f"{name}: the memory folder is locked by another writer"
            ) from None
        except OSError as exc:
            raise MemoryFileError(
                f"{name}: cannot write in {self.root}: {exc.strerror or exc}"
            ) from None
        return entry

    def _update_index(self, entry: MemoryEntry) -> None:
        index = self.root / INDEX_NAME
        try:
            text = index.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = "# Memory index\n\n"
        description = " ".join(entry.description.split())
        line = f"- [{entry.title}]({entry.name}) - {description}".rstrip(" -")
        marker = f"]({entry.name})"
        lines = text.splitlines()
        for i, existing in enumerate(lines):
            if marker in existing:
                lines[i] = line
                break
        else:
            lines.append(line)
        _atomic_write(index, "\n".join(lines) + "\n")


def _validate(name: str, content: str, entry: MemoryEntry) -> None:
    if entry.error is not None:
        raise MemoryFileError(f"{name}: {entry.error}", field="content")
    meta, _body, had = split_frontmatter(content)
    if not had:
        raise MemoryFileError(
            f"{name}: memory files start with a frontmatter block "
            "('---' lines) holding name, description and type",
            field="content",
        )
    missing = [f for f in REQUIRED_FIELDS if _scalar(meta.get(f)) is None]
    if missing:
        raise MemoryFileError(
            f"{name}: frontmatter is missing {', '.join(missing)}", field="content"
        )


def _atomic_write(path: Path, content: str) -> None:
    write_atomic(path, content.encode("utf-8"), mode=0o600)  # memory stays private
