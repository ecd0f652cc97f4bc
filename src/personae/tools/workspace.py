"""The workspace: one root directory every file and shell tool is confined to.

Paths given by a model are resolved the way the operating system would resolve
them (``..`` and symlinks included) and must land inside the root; anything
else is refused with a :class:`~personae.errors.ToolError` naming the path.

Resolving is only the check; the open is race-free. A resolved path has no
symlink in it, so the file tools open it one component at a time from a
descriptor of the root (``openat`` with ``O_NOFOLLOW | O_DIRECTORY``), and
create and rename files relative to the parent's descriptor. If another process
swaps a folder for a symlink between the check and the open, the open fails
(:class:`PathChangedError`) instead of following the link out of the root.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from personae.errors import ToolError, UsageError

__all__ = ["PathChangedError", "Workspace", "changed_error"]

_MAX_PATH_CHARS = 4096
_DIR_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_DIRECTORY", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


class PathChangedError(OSError):
    """A component of a checked path turned into a symlink or a file before it was opened."""


def changed_error(tool: str, shown: str) -> ToolError:
    """The tool error for a path that changed between its check and its open."""
    return ToolError(
        tool,
        f"{shown} changed while it was being opened (a folder was replaced by a link "
        "or a file); refused",
        path=shown,
    )


class Workspace:
    """A directory tree tools may read and write, and nothing outside it.

    The root itself is resolved once (a symlinked root is fine); every path a
    tool receives goes through :meth:`resolve`.
    """

    __slots__ = ("_root",)

    def __init__(self, root: str | os.PathLike[str]) -> None:
        try:
            resolved = Path(root).resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            raise UsageError(f"workspace root {str(root)!r} does not exist ({exc})") from exc
        if not resolved.is_dir():
            raise UsageError(f"workspace root {str(root)!r} is not a directory")
        self._root = resolved

    @classmethod
    def absent(cls, root: str | os.PathLike[str]) -> Workspace:
        """A workspace on ``root``, a folder that does not exist and is never created (a
        team built in memory without one): no built-in tool is offered on it, and a
        path in it does not resolve, so nothing reads or writes through it."""
        if os.path.lexists(root):
            raise UsageError(f"workspace root {str(root)!r} exists; use Workspace(root)")
        workspace = cls.__new__(cls)
        workspace._root = Path(os.path.abspath(root))
        return workspace

    @property
    def root(self) -> Path:
        """The resolved root directory."""
        return self._root

    def with_root(self, new_root: str | os.PathLike[str]) -> Workspace:
        """A workspace rooted at ``new_root`` (for example a per-task temp directory)."""
        return Workspace(new_root)

    def __repr__(self) -> str:
        return f"Workspace({str(self._root)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Workspace) and other._root == self._root

    def __hash__(self) -> int:
        return hash(self._root)

    def contains(self, path: Path) -> bool:
        """Whether the already-resolved ``path`` is the root or lies under it."""
        return path == self._root or path.is_relative_to(self._root)

    def resolve(self, path: object, *, tool: str = "workspace") -> Path:
        """Resolve ``path`` (relative to the root, or absolute) and check it stays inside.

        Symlinks are followed (a dangling one resolves to its target's path), so
        a link that points out of the root is refused just like ``../..``.

        Raises:
            ToolError: the path is not a string, is empty, holds NUL or control
                characters or text that is not valid Unicode, or resolves outside
                the root.
        """
        text = _check_text(path, tool)
        candidate = Path(text)
        if not candidate.is_absolute():
            candidate = self._root / candidate
        try:
            resolved = Path(os.path.realpath(candidate))
        except (OSError, ValueError) as exc:  # pragma: no cover - realpath rarely raises
            raise ToolError(tool, f"cannot resolve path {text!r}: {exc}", path=text) from exc
        if not self.contains(resolved):
            raise ToolError(
                tool,
                f"path {text!r} resolves outside the workspace {str(self._root)!r}",
                path=text,
            )
        return resolved

    def open_dir(self, path: Path, *, create: bool = False) -> int:
        """A descriptor of the resolved directory ``path``, opened without following links.

        Each component below the root is opened relative to its parent's
        descriptor with ``O_NOFOLLOW | O_DIRECTORY``; with ``create`` missing
        ones are made (``mkdirat``). The caller closes the descriptor.

        Raises:
            PathChangedError: a component is (now) a symlink or not a directory.
            OSError: anything else (``FileNotFoundError`` for a missing one).
        """
        parts = self._parts(path)
        fd = os.open(self._root, _DIR_FLAGS)
        for part in parts:
            fd = _step(fd, part, create)  # closes the parent's descriptor, whatever happens
        return fd

    @contextlib.contextmanager
    def parent_fd(self, path: Path, *, create: bool = False) -> Iterator[tuple[int, str]]:
        """``(descriptor of the parent folder, final name)`` of the resolved ``path``.

        Use the name with ``dir_fd=`` (``os.open``, ``os.rename``...). The root
        itself has no parent inside the workspace: ``ValueError``.
        """
        parts = self._parts(path)
        if not parts:
            raise ValueError("the workspace root has no parent inside the workspace")
        fd = self.open_dir(self._root.joinpath(*parts[:-1]), create=create)
        try:
            yield fd, parts[-1]
        finally:
            os.close(fd)

    def _parts(self, path: Path) -> tuple[str, ...]:
        if not self.contains(path):
            raise ValueError(f"{path} is not inside the workspace {self._root}")
        return path.relative_to(self._root).parts

    def relative(self, path: Path) -> str:
        """``path`` shown relative to the root (``.`` for the root itself)."""
        try:
            rel = path.relative_to(self._root)
        except ValueError:
            return str(path)
        text = rel.as_posix()
        return text if text else "."


def _step(parent: int, name: str, create: bool) -> int:
    """Open directory ``name`` below descriptor ``parent`` (closing ``parent``); no links."""
    try:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, dir_fd=parent)
            return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(name, parent):
            raise PathChangedError(exc.errno, f"{name} is a symbolic link") from None
        raise
    finally:
        os.close(parent)


def _is_link(name: str, parent: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return True  # it vanished or changed again: still not the checked folder


def _check_text(path: object, tool: str) -> str:
    """Reject values that are not plain, printable, valid-Unicode path strings."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        raise ToolError(tool, f"path must be a string, got {type(path).__name__}", path=repr(path))
    if not path.strip():
        raise ToolError(tool, "path is empty", path=path)
    if len(path) > _MAX_PATH_CHARS:
        raise ToolError(tool, f"path is longer than {_MAX_PATH_CHARS} characters", path=path[:80])
    if "\x00" in path:
        raise ToolError(tool, f"path {path!r} contains a NUL byte", path=path)
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in path):
        raise ToolError(tool, f"path {path!r} contains control characters", path=path)
    try:
        path.encode("utf-8")
    except UnicodeEncodeError as exc:
        # Lone surrogates (undecodable bytes smuggled through surrogateescape).
        raise ToolError(tool, f"path {path!r} is not valid Unicode", path=repr(path)) from exc
    return path
