"""Recent commits for the ``git_log`` source, read once per commit.

The log shown is a function of the commit ``HEAD`` names (commits never
change), so it is remembered by repository and commit: a turn whose ``HEAD``
did not move reads two small files under ``.git`` and runs nothing. When
``HEAD`` moved (or the repository is laid out in a way this reader does not
follow), ``git log`` runs as a plain spawn: no ``preexec`` hook, so the
process is started without copying the parent's memory (a large agent process
paid tens of milliseconds for that), in its own process group, killed with
that group at the timeout.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections import OrderedDict
from pathlib import Path

from personae.context._lru import recall, remember
from personae.procs import run_tied

__all__ = ["git_log", "head_commit"]

_MEMO: OrderedDict[tuple[str, str, int], str] = OrderedDict()
_MEMO_MAX = 64
_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
_ENV_OVERRIDES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def _git_dir(root: Path) -> Path | None:
    """The repository's git directory, found as git finds it (``.git`` folder or file)."""
    for folder in (root, *root.parents):
        dot = folder / ".git"
        if dot.is_dir():
            return dot
        if dot.is_file():
            text = _read(dot) or ""
            if not text.startswith("gitdir:"):
                return None
            target = Path(text[len("gitdir:") :].strip())
            return target if target.is_absolute() else (folder / target).resolve()
    return None


def head_commit(root: Path) -> tuple[str, str] | None:
    """``(git directory, commit id)`` of ``HEAD`` read from the files under ``.git``;
    ``None`` when it cannot be read that way (no repository, an unborn branch, a
    layout this reader does not follow, ``GIT_DIR`` and the like set)."""
    if any(os.environ.get(name) for name in _ENV_OVERRIDES):
        return None
    gitdir = _git_dir(root)
    if gitdir is None:
        return None
    head = _read(gitdir / "HEAD")
    if head is None:
        return None
    if _SHA.match(head):
        return str(gitdir), head
    if not head.startswith("ref: refs/"):
        return None
    ref = head[len("ref: ") :].strip()
    common_rel = _read(gitdir / "commondir")
    common = gitdir if common_rel is None else (gitdir / common_rel).resolve()
    for base in (gitdir, common):
        sha = _read(base / ref)
        if sha is not None:
            return (str(gitdir), sha) if _SHA.match(sha) else None
    packed = _read(common / "packed-refs") or ""
    for line in packed.splitlines():
        sha, _, name = line.partition(" ")
        if name == ref and _SHA.match(sha):
            return str(gitdir), sha
    return None


def git_log(root: Path, *, count: int = 15, timeout: float = 3.0) -> str | None:
    """Recent commits as plain lines (newest first); None without git or a repository."""
    head = head_commit(root)
    key = (head[0], head[1], count) if head is not None else None
    if key is not None:
        got = recall(_MEMO, key)
        if got is not None:
            return got
    log = _run(root, count, timeout)
    if key is not None and log is not None:
        remember(_MEMO, key, log, _MEMO_MAX)
    return log


def _run(root: Path, count: int, timeout: float) -> str | None:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    argv = [
        "git", "--no-pager", "log", f"-n{count}", "--no-merges", "--date=short",
        "--pretty=format:- %ad %s (%h)",
    ]  # fmt: skip
    try:
        proc = run_tied(argv, cwd=root, timeout=timeout, env=env, fork_free=True)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = proc.stdout.strip()
    if proc.returncode != 0 or not out:
        return None
    return f"Recent commits (newest first):\n{out}"
