"""A confinement race: a second process flips a workspace folder to a symlink pointing outside.

Shared by ``tests/test_tools_confine.py`` (a few thousand attempts) and
``bench/bench_confinement.py`` (30,000 each way). The flipper swaps
``ws/d`` (a real folder) and ``ws/spare`` (a symlink to ``outside/``) with
``renameat2(RENAME_EXCHANGE)`` in a tight loop, so ``ws/d`` always exists and
is, at any instant, either the folder or the link. Each attempt calls the real
tool function; an escape is a read (``read_file``, ``grep``, ``list_dir``)
that returns text or names from ``outside/``, or a write that lands there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from personae.errors import ToolError
from personae.tools._files import ReadFileArgs, WriteFileArgs, read_file, write_file
from personae.tools._search import GrepArgs, ListDirArgs, grep, list_dir
from personae.tools.base import ToolContext
from personae.tools.workspace import Workspace

FLIPPER = r"""
import ctypes, os, sys
os.chdir(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
RENAME_EXCHANGE, AT_FDCWD = 2, -100
exchange = getattr(libc, "renameat2", None)
if exchange is None:
    raise SystemExit("renameat2 is missing from the C library")
print("ready", flush=True)
while True:
    if exchange(AT_FDCWD, b"d", AT_FDCWD, b"spare", RENAME_EXCHANGE) != 0:
        raise SystemExit(f"renameat2 failed: errno {ctypes.get_errno()}")
"""


@dataclass
class RaceResult:
    """How the attempts of one kind ended."""

    kind: str
    attempts: int
    escapes: int = 0
    inside: int = 0
    refused: int = 0
    wall: float = 0.0
    cpu: float = 0.0


def _prepare(root: Path) -> tuple[Path, Path]:
    ws, outside = root / "ws", root / "outside"
    (ws / "d").mkdir(parents=True)
    outside.mkdir()
    (ws / "d" / "secret.txt").write_text("INSIDE\n")
    (outside / "secret.txt").write_text("OUTSIDE\n")
    (outside / "outside-only.txt").write_text("OUTSIDE\n")
    (ws / "spare").symlink_to(outside, target_is_directory=True)
    return ws, outside


KINDS = ("read", "write", "list", "grep")
NAIVE = "naive-read"
"""The alternative for comparison: check the path, then open it by name (the old way)."""
_TOOLS = {"read": "read_file", "write": "write_file", "list": "list_dir", "grep": "grep"}


def _call(kind: str, ctx: ToolContext) -> str:
    if kind == NAIVE:
        return ctx.workspace.resolve("d/secret.txt", tool=ctx.tool).read_text()
    if kind == "read":
        return read_file(ReadFileArgs(path="d/secret.txt"), ctx)
    if kind == "write":
        return write_file(WriteFileArgs(path="d/w.txt", content="x"), ctx)
    if kind == "list":
        return list_dir(ListDirArgs(path="d"), ctx)
    return grep(GrepArgs(pattern="SIDE", path="d"), ctx)


def race(root: Path, kind: str, attempts: int) -> RaceResult:
    """Run ``attempts`` calls of one kind (see :data:`KINDS`) against a running flipper."""
    ws, outside = _prepare(root)
    ctx = ToolContext(workspace=Workspace(ws), tool=_TOOLS.get(kind, kind))
    result = RaceResult(kind=kind, attempts=attempts)
    flipper = subprocess.Popen(
        [sys.executable, "-c", FLIPPER, str(ws)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert flipper.stdout is not None
        if flipper.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the flipper did not start (exit {flipper.wait()})")
        wall, cpu = time.perf_counter(), time.process_time()
        escaped = outside / "w.txt"
        for _ in range(attempts):
            try:
                text = _call(kind, ctx)
                if kind == "write":
                    result.inside += 1
                else:
                    result.escapes += "OUTSIDE" in text or "outside-only" in text
                    result.inside += "INSIDE" in text or "secret.txt" in text
            except (ToolError, OSError):
                result.refused += 1
            if kind == "write" and os.path.lexists(escaped):
                result.escapes += 1
                result.inside -= 1
                os.unlink(escaped)
        result.wall = time.perf_counter() - wall
        result.cpu = time.process_time() - cpu
        if flipper.poll() is not None:
            raise RuntimeError(f"the flipper stopped early (exit {flipper.returncode})")
    finally:
        flipper.send_signal(signal.SIGKILL)
        flipper.wait()
    return result
