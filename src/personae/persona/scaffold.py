"""Scaffold a project's ``.personae/`` from the bundled example cast (``personae init``).

Idempotent: files that already match are left alone, files the user changed
are never overwritten, and every new file is written atomically.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

from personae.errors import UsageError
from personae.fsutil import write_atomic

__all__ = ["InitReport", "example_files", "init_project", "write_text_atomic"]


@dataclass
class InitReport:
    """What ``init_project`` did, by relative path."""

    root: Path
    """The project folder."""
    created: list[Path] = field(default_factory=list)
    """Files written."""
    unchanged: list[Path] = field(default_factory=list)
    """Files already present with the example's content."""
    kept: list[Path] = field(default_factory=list)
    """Files present with other content (the user's changes, left alone)."""

    @property
    def changed_anything(self) -> bool:
        """Whether any file was written."""
        return bool(self.created)


def _walk(node: Traversable, prefix: Path) -> list[tuple[Path, bytes]]:
    out: list[tuple[Path, bytes]] = []
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        rel = prefix / child.name
        if child.is_dir():
            if child.name != "__pycache__":
                out.extend(_walk(child, rel))
        else:
            out.append((rel, child.read_bytes()))
    return out


def example_files() -> list[tuple[Path, bytes]]:
    """The bundled example project: (relative path, content) pairs, sorted."""
    base = resources.files("personae").joinpath("examples").joinpath("project")
    return _walk(base, Path())


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, data)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file + rename); UsageError on failure.

    A new file gets the normal mode (``0666 & ~umask``); a replaced file keeps its mode.
    """
    try:
        _write_atomic(Path(path), text.encode("utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot write: {exc.strerror}", file=path) from exc


def _check_folders(root: Path, rel: Path, resolved_root: Path) -> None:
    """Every folder on the way to ``root / rel`` is a folder (or absent) inside the project."""
    here = root
    for part in rel.parent.parts:
        here = here / part
        if here.is_symlink() and not here.exists():
            raise UsageError("dangling symlink where a folder should be", file=here)
        if here.exists() and not here.is_dir():
            raise UsageError("not a directory (a file is in the way)", file=here)
    if not (root / rel).parent.resolve().is_relative_to(resolved_root):
        raise UsageError(
            "folder is a symlink leading outside the project", file=(root / rel).parent
        )


def init_project(root: Path) -> InitReport:
    """Copy the example cast into ``root`` (created if missing); never overwrite a file.

    Every target is checked before anything is written, so a file in the way
    of a folder fails the whole run with nothing written.
    """
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise UsageError("not a directory", file=root)
    report = InitReport(root=root)
    resolved_root = root.resolve()
    todo: list[tuple[Path, bytes]] = []
    for rel, data in example_files():
        target = root / rel
        if target.is_symlink() or target.exists():
            try:
                same = target.is_file() and target.read_bytes() == data
            except OSError:
                same = False
            (report.unchanged if same else report.kept).append(rel)
            continue
        _check_folders(root, rel, resolved_root)
        todo.append((rel, data))
    for rel, data in todo:
        target = root / rel
        try:
            _write_atomic(target, data)
        except OSError as exc:
            raise UsageError(f"cannot write: {exc.strerror}", file=target) from exc
        report.created.append(rel)
    return report
