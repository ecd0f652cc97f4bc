"""Built-in file tools: read_file, write_file, edit_file."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from pydantic import BaseModel, ConfigDict, Field, model_validator

from personae.fsutil import write_atomic
from personae.layout import control_name
from personae.tools.base import ToolContext
from personae.tools.workspace import PathChangedError, changed_error

__all__ = [
    "EditFileArgs",
    "ReadFileArgs",
    "WriteFileArgs",
    "edit_file",
    "read_file",
    "write_file",
]

_BINARY_SNIFF = 8192
_CHUNK = 1 << 20


class ReadFileArgs(BaseModel):
    """Arguments of ``read_file``."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File path, relative to the workspace root.")
    offset: int = Field(default=1, ge=1, description="First line to return (1-based).")
    limit: int | None = Field(default=None, ge=1, description="Number of lines to return.")


class WriteFileArgs(BaseModel):
    """Arguments of ``write_file``."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File path, relative to the workspace root.")
    content: str = Field(description="The complete new content of the file.")


class Edit(BaseModel):
    """One exact-text replacement."""

    model_config = ConfigDict(extra="forbid")

    old_string: str = Field(description="Exact text to replace (must occur exactly once).")
    new_string: str = Field(description="Replacement text.")
    replace_all: bool = Field(default=False, description="Replace every occurrence.")


class EditFileArgs(BaseModel):
    """Arguments of ``edit_file``: one edit, or a list applied in order (all or nothing)."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File path, relative to the workspace root.")
    old_string: str | None = Field(default=None, description="Exact text to replace.")
    new_string: str | None = Field(default=None, description="Replacement text.")
    replace_all: bool = Field(default=False, description="Replace every occurrence.")
    edits: list[Edit] | None = Field(
        default=None, description="Several edits applied in order; either this or old/new_string."
    )

    @model_validator(mode="after")
    def _one_form(self) -> EditFileArgs:
        single = self.old_string is not None or self.new_string is not None
        if single and self.edits:
            raise ValueError("give either old_string/new_string or edits, not both")
        if not single and not self.edits:
            raise ValueError("give old_string and new_string, or a non-empty edits list")
        if single and (self.old_string is None or self.new_string is None):
            raise ValueError("old_string and new_string go together")
        return self

    def all_edits(self) -> list[Edit]:
        """The edits to apply, in order."""
        if self.edits:
            return list(self.edits)
        assert self.old_string is not None and self.new_string is not None
        return [
            Edit(
                old_string=self.old_string, new_string=self.new_string, replace_all=self.replace_all
            )
        ]


def _open_regular(path: Path, ctx: ToolContext, shown: str) -> int:
    """Open the resolved ``path`` read-only, race-free; it must be a regular file.

    The parent folder is opened component by component from the workspace
    root without following links, and the file relative to it with
    ``O_NOFOLLOW``. ``O_NONBLOCK`` keeps the open of a FIFO from waiting
    forever for a writer (it has no effect on the regular file that is then read).
    """
    if path == ctx.workspace.root:
        raise ctx.error(f"{shown} is a directory", path=shown)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    flags |= getattr(os, "O_CLOEXEC", 0)
    try:
        with ctx.workspace.parent_fd(path) as (parent, name):
            fd = os.open(name, flags, dir_fd=parent)
    except PathChangedError:
        raise changed_error(ctx.tool, shown) from None
    except (FileNotFoundError, NotADirectoryError):
        raise ctx.error(f"no such file: {shown}", path=shown) from None
    except IsADirectoryError:
        raise ctx.error(f"{shown} is a directory", path=shown) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the final name became a link after the check
            raise changed_error(ctx.tool, shown) from None
        raise ctx.error(f"cannot open {shown}: {exc.strerror}", path=shown) from exc
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise ctx.error(f"{shown} is {kind}", path=shown)
    return fd


def _replace(path: Path, data: bytes, ctx: ToolContext, shown: str, *, create: bool) -> None:
    """Write ``data`` atomically to the resolved ``path``: temp file and rename in its parent."""
    try:
        with ctx.workspace.parent_fd(path, create=create) as (parent, name):
            write_atomic(Path(name), data, dir_fd=parent)
    except PathChangedError:
        raise changed_error(ctx.tool, shown) from None
    except OSError as exc:
        raise ctx.error(f"cannot write {shown}: {exc.strerror or exc}", path=shown) from exc


def _skip_lines(fh: BinaryIO, count: int) -> int:
    """Skip ``count`` lines in bounded chunks; return how many were skipped."""
    skipped = 0
    while skipped < count:
        chunk = fh.readline(_CHUNK)
        if not chunk:
            break
        if chunk.endswith(b"\n"):
            skipped += 1
    return skipped


def read_file(args: ReadFileArgs, ctx: ToolContext) -> str:
    """Return lines ``offset``.. of a text file, cut at the byte cap with a notice.

    Lines are read in bounded chunks, so one enormous line cannot exhaust memory.
    """
    path = ctx.workspace.resolve(args.path, tool=ctx.tool)
    shown = ctx.workspace.relative(path)
    cap = ctx.limits.read_max_bytes
    with os.fdopen(_open_regular(path, ctx, shown), "rb") as fh:
        if b"\x00" in fh.read(_BINARY_SNIFF):
            raise ctx.error(f"{shown} looks like a binary file; not returned", path=shown)
        fh.seek(0)
        skipped = _skip_lines(fh, args.offset - 1)
        if skipped < args.offset - 1 or (args.offset > 1 and not fh.peek(1)):
            return f"[{shown} has {skipped} lines; offset {args.offset} is past the end]"
        out: list[bytes] = []
        used = 0
        lines = 0  # complete lines returned
        stopped = ""
        while True:
            if args.limit is not None and lines >= args.limit:
                if fh.peek(1):
                    last = args.offset + lines - 1
                    stopped = f"[more lines after line {last}; use offset={last + 1} to continue]"
                break
            room = None if cap is None else cap - used
            chunk = fh.readline(_CHUNK if room is None else min(_CHUNK, room + 1))
            if not chunk:
                break
            if room is not None and len(chunk) > room:
                if not out:  # a first line longer than the cap: return its start
                    out.append(chunk[:room])
                line = args.offset + lines
                stopped = (
                    f"[truncated at {cap} bytes, stopped in line {line}; "
                    f"use offset={line} and limit to read further]"
                )
                break
            out.append(chunk)
            used += len(chunk)
            if chunk.endswith(b"\n"):
                lines += 1
    text = b"".join(out).decode("utf-8", errors="replace")
    if stopped:
        text = (text if text.endswith("\n") or not text else text + "\n") + stopped
    return text


def _check_size(data: bytes, ctx: ToolContext, shown: str) -> None:
    cap = ctx.limits.write_max_bytes
    if cap is not None and len(data) > cap:
        raise ctx.error(f"content for {shown} is {len(data)} bytes; the cap is {cap}", path=shown)


def _check_writable(shown: str, ctx: ToolContext) -> None:
    """Refuse a control path (``.git/``, ``.personae/``, ``CLAUDE.md`` ...) not granted."""
    name = control_name(shown)
    if name is not None and name not in ctx.limits.control_write:
        raise ctx.error(
            f"{shown} is under {name}, a control path (it governs later runs, git or a "
            "host): read-only to the agent unless the project config grants it "
            "(sandbox.control_write)",
            path=shown,
        )


def write_file(args: WriteFileArgs, ctx: ToolContext) -> str:
    """Create or replace a file atomically (parent directories are created)."""
    path = ctx.workspace.resolve(args.path, tool=ctx.tool)
    shown = ctx.workspace.relative(path)
    _check_writable(shown, ctx)
    if path == ctx.workspace.root or path.is_dir():
        raise ctx.error(f"{shown} is a directory", path=shown)
    data = args.content.encode("utf-8")
    _check_size(data, ctx, shown)
    existed = path.exists()
    _replace(path, data, ctx, shown, create=True)
    verb = "replaced" if existed else "created"
    return f"{verb} {shown} ({len(data)} bytes)"


def edit_file(args: EditFileArgs, ctx: ToolContext) -> str:
    """Apply exact-text replacements in order; nothing is written unless every edit applies."""
    path = ctx.workspace.resolve(args.path, tool=ctx.tool)
    shown = ctx.workspace.relative(path)
    _check_writable(shown, ctx)
    with os.fdopen(_open_regular(path, ctx, shown), "rb") as fh:
        raw = fh.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ctx.error(f"{shown} is not UTF-8 text; cannot edit", path=shown) from None
    replaced = 0
    for index, edit in enumerate(args.all_edits(), start=1):
        label = f"edit {index}: " if args.edits else ""
        if edit.old_string == "":
            raise ctx.error(f"{label}old_string is empty (use write_file to create)", path=shown)
        if edit.old_string == edit.new_string:
            raise ctx.error(f"{label}old_string and new_string are identical", path=shown)
        count = text.count(edit.old_string)
        if count == 0:
            raise ctx.error(f"{label}old_string not found in {shown}", path=shown)
        if count > 1 and not edit.replace_all:
            raise ctx.error(
                f"{label}old_string occurs {count} times in {shown}; "
                "add surrounding context to make it unique or set replace_all",
                path=shown,
            )
        text = text.replace(edit.old_string, edit.new_string)
        replaced += count
    data = text.encode("utf-8")
    _check_size(data, ctx, shown)
    _replace(path, data, ctx, shown, create=False)
    plural = "s" if replaced != 1 else ""
    return f"edited {shown}: {replaced} replacement{plural}"
