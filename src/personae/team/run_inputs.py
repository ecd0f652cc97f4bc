"""What a run saw when it started, kept so a replay can rebuild it.

:func:`capture_inputs` records the run's options that shape its context (persona, profile,
handover text, git log, budget share, retries, caps), the conversation's position and the
project's files by hash (:func:`project_files`). :func:`prepare_workspace` builds a replay's
workspace from that record: a copy of the project without the files the original run did
not see, and a list of what differs (a file changed or gone since).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from personae.layout import DIR_NAME
from personae.store.replays import RunInputs
from personae.tools._walk import SKIP_DIRS

__all__ = [
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "capture_inputs",
    "prepare_workspace",
    "project_files",
]

MAX_FILES = 5000
"""Most project files hashed at a run's start (a larger project is recorded in part)."""
MAX_FILE_BYTES = 64 * 1024 * 1024
"""Most bytes hashed at a run's start."""

_OPTION_FIELDS = (
    "persona", "profile", "handover_text", "include_git_log", "budget_share", "max_retries",
    "request_cap", "model_window",
)  # fmt: skip
"""The run options (:class:`~personae.team.session.RunOptions`) a replay needs again."""

_STORE_FILES = ("state.db", "state.db-wal", "state.db-shm")
"""The store's own files in the project folder (never copied into a replay's workspace)."""


def _files(root: Path) -> list[Path]:
    """The project's regular files (relative), sorted, without personae's folder and the
    folders every walk skips (``.git``, ``node_modules`` ...)."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        skip = SKIP_DIRS | ({DIR_NAME} if here == root else set())
        dirnames[:] = sorted(d for d in dirnames if d not in skip)
        for name in sorted(filenames):
            path = here / name
            if path.is_file() and not path.is_symlink():
                found.append(path.relative_to(root))
    return found


def project_files(root: Path) -> tuple[dict[str, str], str]:
    """``(relative path -> sha256, note)`` of the project's files; the note says why the
    list stops early (more than :data:`MAX_FILES` files or :data:`MAX_FILE_BYTES` bytes)."""
    hashes: dict[str, str] = {}
    total = 0
    for rel in _files(root):
        if len(hashes) >= MAX_FILES:
            return hashes, f"more than {MAX_FILES} files: the first {MAX_FILES} were recorded"
        path = root / rel
        try:
            data = path.read_bytes()
        except OSError:
            continue
        total += len(data)
        if total > MAX_FILE_BYTES:
            mb = MAX_FILE_BYTES // (1024 * 1024)
            return hashes, f"more than {mb} MB of files: recorded in part"
        hashes[rel.as_posix()] = hashlib.sha256(data).hexdigest()
    return hashes, ""


def capture_inputs(
    options: Mapping[str, Any], *, root: Path, session: str, history_seq: int
) -> RunInputs:
    """What a run started with ``options`` (the fields of its ``RunOptions``) on the project
    at ``root`` sees besides its task."""
    files, note = project_files(root)
    return RunInputs(
        **{name: options[name] for name in _OPTION_FIELDS},
        session_id=session,
        history_seq=history_seq,
        files=files,
        files_complete=not note,
        files_note=note,
    )


def prepare_workspace(root: Path, inputs: RunInputs | None, into: Path) -> list[str]:
    """Copy the project at ``root`` into ``into`` as the run of ``inputs`` saw it, as far as
    the record allows; returns how the copy differs from what the run saw.

    Files the run did not see (created since, by the run itself or later) are left out;
    a file changed or gone since is named (its old content is not kept). personae's own
    folder is copied without the store. ``inputs`` ``None`` (a run stored before inputs
    were kept): the project as it is now, and a note saying so.
    """
    drift: list[str] = []
    into.mkdir(parents=True, exist_ok=True)
    now = _files(root)
    if inputs is None:
        drift.append("the run's project files were not recorded (stored before replays were "
                     "kept): the replay saw the project as it is now")  # fmt: skip
        seen = {p.as_posix() for p in now}
    else:
        seen = set(inputs.files)
        if not inputs.files_complete:
            drift.append(f"the run's project files were recorded in part ({inputs.files_note})")
    current = {p.as_posix(): p for p in now}
    for rel in sorted(seen):
        src = current.get(rel)
        if src is None:
            drift.append(f"{rel}: gone since the run (not in the replay's copy)")
            continue
        target = into / src
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / src, target)
        if inputs is not None and inputs.files.get(rel) != _sha256(target):
            drift.append(f"{rel}: changed since the run (the replay saw today's content)")
    if inputs is not None and inputs.files_complete:
        left_out = sorted(set(current) - seen)
        if left_out:
            shown = ", ".join(left_out[:5]) + (" ..." if len(left_out) > 5 else "")
            drift.append(f"left out {len(left_out)} file(s) created since the run: {shown}")
    elif inputs is not None:  # recorded in part: copy the rest as it is now
        for rel in sorted(set(current) - seen):
            target = into / current[rel]
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / current[rel], target)
    _copy_personae_folder(root / DIR_NAME, into / DIR_NAME)
    return drift


def _copy_personae_folder(src: Path, dst: Path) -> None:
    """personae's folder (personas, config, directive) without the store's files."""
    if not src.is_dir():
        return
    shutil.copytree(
        src, dst, symlinks=True, dirs_exist_ok=True,
        ignore=lambda _d, names: [n for n in names if n in _STORE_FILES],
    )  # fmt: skip


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
