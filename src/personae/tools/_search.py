"""Built-in lookup tools: list_dir, glob, grep."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import PurePosixPath

from pydantic import BaseModel, ConfigDict, Field

from personae.tools._walk import WalkedFile, glob_regex, walk_files
from personae.tools.base import ToolContext
from personae.tools.workspace import PathChangedError, changed_error

__all__ = ["GlobArgs", "GrepArgs", "ListDirArgs", "glob_files", "grep", "list_dir"]

_MAX_LINE_CHARS = 500


class ListDirArgs(BaseModel):
    """Arguments of ``list_dir``."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(default=".", description="Directory, relative to the workspace root.")


class GlobArgs(BaseModel):
    """Arguments of ``glob``."""

    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(description="Glob such as '**/*.py' or 'src/*.{md,txt}'.")
    path: str = Field(default=".", description="Directory to search from.")


class GrepArgs(BaseModel):
    """Arguments of ``grep``."""

    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(description="Python regular expression searched line by line.")
    path: str = Field(default=".", description="File or directory to search.")
    glob: str | None = Field(
        default=None,
        description="Only files matching this glob ('*.py' matches the file name anywhere).",
    )
    ignore_case: bool = Field(default=False, description="Case-insensitive match.")
    max_results: int | None = Field(default=None, ge=1, description="Stop after this many lines.")


class _Budget:
    """Stops a walk after ``limit`` files and says so."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.stopped = False

    def files(self, files: Iterator[WalkedFile]) -> Iterator[WalkedFile]:
        for count, file in enumerate(files):
            if self.limit is not None and count >= self.limit:
                self.stopped = True
                return
            yield file

    def notice(self, sep: str) -> str:
        if not self.stopped:
            return ""
        return f"{sep}[stopped after looking at {self.limit} files; search a narrower path]"


def _cap(requested: int | None, limit: int | None) -> int | None:
    if requested is None:
        return limit
    return requested if limit is None else min(requested, limit)


def list_dir(args: ListDirArgs, ctx: ToolContext) -> str:
    """List a directory: sub-directories end in ``/``, symlinks show ``-> target``."""
    path = ctx.workspace.resolve(args.path, tool=ctx.tool)
    shown = ctx.workspace.relative(path)
    if not path.exists():
        raise ctx.error(f"no such directory: {shown}", path=shown)
    if not path.is_dir():
        raise ctx.error(f"{shown} is not a directory", path=shown)
    try:
        fd = ctx.workspace.open_dir(path)
    except PathChangedError:
        raise changed_error(ctx.tool, shown) from None
    except OSError as exc:
        raise ctx.error(f"cannot list {shown}: {exc.strerror}", path=shown) from exc
    try:
        entries = sorted(os.scandir(fd), key=lambda e: e.name)
        cap = ctx.limits.list_max_entries
        lines = [_entry_line(e, fd) for e in (entries[:cap] if cap is not None else entries)]
    except OSError as exc:
        raise ctx.error(f"cannot list {shown}: {exc.strerror}", path=shown) from exc
    finally:
        os.close(fd)
    if cap is not None and len(entries) > cap:
        lines.append(f"[{len(entries) - cap} more entries not shown]")
    if not lines:
        return f"[{shown} is empty]"
    return "\n".join(lines)


def _entry_line(entry: os.DirEntry[str], dir_fd: int) -> str:
    if entry.is_symlink():
        return f"{entry.name} -> {os.readlink(entry.name, dir_fd=dir_fd)}"
    if entry.is_dir():
        return entry.name + "/"
    return entry.name


def _check_pattern(pattern: str, ctx: ToolContext) -> None:
    if not pattern.strip() or "\x00" in pattern:
        raise ctx.error("pattern is empty or holds a NUL byte")
    parts = PurePosixPath(pattern).parts
    if pattern.startswith("/") or ".." in parts:
        raise ctx.error(f"pattern {pattern!r} may not be absolute or contain '..'")
    try:
        glob_regex(pattern)
    except re.error as exc:
        raise ctx.error(f"invalid glob pattern {pattern!r}: {exc.msg}") from None


def glob_files(args: GlobArgs, ctx: ToolContext) -> str:
    """Files matching a glob below ``path``, relative to the workspace root, sorted."""
    _check_pattern(args.pattern, ctx)
    start = ctx.workspace.resolve(args.path, tool=ctx.tool)
    if not start.is_dir():
        raise ctx.error(f"{ctx.workspace.relative(start)} is not a directory")
    regex = glob_regex(args.pattern)
    cap = ctx.limits.list_max_entries
    found: list[str] = []
    more = 0
    walked = _Budget(ctx.limits.walk_max_files)
    for file in walked.files(walk_files(ctx.workspace, start)):
        rel = file.path.relative_to(start).as_posix()
        if regex.match(rel):
            if cap is not None and len(found) >= cap:
                more += 1
                continue
            found.append(ctx.workspace.relative(file.path))
    if not found:
        return f"[no files match {args.pattern!r}]{walked.notice(' ')}"
    if more:
        found.append(f"[{more} more files not shown]")
    return "\n".join(found) + walked.notice("\n")


def _compile(args: GrepArgs, ctx: ToolContext) -> re.Pattern[str]:
    try:
        return re.compile(args.pattern, re.IGNORECASE if args.ignore_case else 0)
    except re.error as exc:
        raise ctx.error(f"invalid regular expression {args.pattern!r}: {exc}") from exc


def _file_filter(args: GrepArgs, ctx: ToolContext) -> re.Pattern[str] | None:
    if args.glob is None:
        return None
    _check_pattern(args.glob, ctx)
    return glob_regex(args.glob)


def grep(args: GrepArgs, ctx: ToolContext) -> str:
    """Lines matching a regex, as ``path:line: text``, capped with a notice."""
    regex = _compile(args, ctx)
    only = _file_filter(args, ctx)
    start = ctx.workspace.resolve(args.path, tool=ctx.tool)
    if not start.exists():
        raise ctx.error(f"no such file or directory: {ctx.workspace.relative(start)}")
    cap = _cap(args.max_results, ctx.limits.grep_max_results)
    size_cap = ctx.limits.grep_max_file_bytes
    hits: list[str] = []
    more = 0
    skipped = 0
    walked = _Budget(ctx.limits.walk_max_files)
    is_dir = start.is_dir()
    for file in walked.files(walk_files(ctx.workspace, start)):
        rel = file.path.relative_to(start).as_posix() if is_dir else file.path.name
        if only is not None and not (only.match(rel) or only.match(file.path.name)):
            continue
        try:
            fd = file.open(ctx.workspace)
        except (OSError, ValueError):
            continue  # it changed or vanished since it was listed
        with os.fdopen(fd, "rb") as fh:
            if size_cap is not None and os.fstat(fd).st_size > size_cap:
                skipped += 1
                continue
            try:
                data = fh.read()
            except OSError:
                continue
        more += _grep_file(ctx.workspace.relative(file.path), data, regex, hits, cap)
    if not hits:
        return f"[no matches for {args.pattern!r}]{walked.notice(' ')}"
    if more:
        hits.append(f"[{more} more matching lines not shown; narrow the search]")
    if skipped:
        hits.append(f"[{skipped} files over {size_cap} bytes skipped]")
    return "\n".join(hits) + walked.notice("\n")


def _grep_file(
    shown: str, data: bytes, regex: re.Pattern[str], hits: list[str], cap: int | None
) -> int:
    """Append matches of one file's ``data`` to ``hits``; return how many did not fit."""
    if b"\x00" in data[:8192]:
        return 0
    overflow = 0
    for lineno, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if regex.search(line):
            if cap is not None and len(hits) >= cap:
                overflow += 1
                continue
            text = line if len(line) <= _MAX_LINE_CHARS else line[:_MAX_LINE_CHARS] + "…"
            hits.append(f"{shown}:{lineno}: {text}")
    return overflow
