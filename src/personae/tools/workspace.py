"""The workspace: one root directory every file and shell tool is confined to.

Paths given by a model are resolved the way the operating system would resolve
them (``..`` and symlinks included) and must land inside the root; anything
else is refused with a :class:`~personae.errors.ToolError` naming the path.
"""

from __future__ import annotations

import os
from pathlib import Path

from personae.errors import ToolError, UsageError

__all__ = ["Workspace"]

_MAX_PATH_CHARS = 4096


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

    def relative(self, path: Path) -> str:
        """``path`` shown relative to the root (``.`` for the root itself)."""
        try:
            rel = path.relative_to(self._root)
        except ValueError:
            return str(path)
        text = rel.as_posix()
        return text if text else "."


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
