"""The task file of a batch: JSON Lines, one team run per line, checked before anything runs.

Each line is an object with ``task`` (or ``prompt``), and optionally ``id``,
``persona``, ``model``, ``session``, ``timeout`` and ``retries``. Blank lines
are ignored. A bad line stops the batch before it starts, with ``FILE:LINE``.
A task without ``id`` gets one from its content (stable across restarts, so a
resumed batch knows which tasks are done; the n-th repeat of the same line
gets ``-n``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from personae.errors import UsageError, first_validation_error
from personae.fsutil import read_input

__all__ = ["MAX_TASK_FILE_BYTES", "BatchTask", "load_tasks"]

MAX_TASK_FILE_BYTES = 64 * 1024 * 1024
"""Largest task file read."""

_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.:@-]*$"


class BatchTask(BaseModel):
    """One independent team run of a batch (a line of the task file)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    id: str = Field(default="", max_length=128, pattern=r"^$|^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
    """Unique id in the batch (default: derived from the line's content)."""
    task: str = Field(min_length=1, max_length=100_000)
    """What the team should do (``prompt`` is accepted as another name)."""
    persona: str | None = Field(default=None, min_length=1, max_length=128, pattern=_NAME)
    """Active persona (default: the project's)."""
    model: str | None = Field(default=None, min_length=1, max_length=4096)
    """Model (``provider:name``; ``scripted:FILE`` for the scripted server)."""
    session: str | None = Field(default=None, min_length=1, max_length=256, pattern=_NAME)
    """Conversation session the run continues."""
    timeout: float | None = Field(default=None, gt=0, le=86_400)
    """Seconds per attempt (default: the batch's)."""
    retries: int | None = Field(default=None, ge=0, le=10)
    """Retries after a failed attempt (default: the batch's)."""

    @model_validator(mode="before")
    @classmethod
    def _prompt(cls, data: Any) -> Any:
        if isinstance(data, dict) and "prompt" in data:
            if "task" in data:
                raise ValueError("give either 'task' or 'prompt', not both")
            data = {("task" if k == "prompt" else k): v for k, v in data.items()}
        return data


def _content_id(raw: dict[str, Any]) -> str:
    body = json.dumps(raw, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "t-" + hashlib.sha256(body.encode("utf-8")).hexdigest()[:12]


def _read(path: Path) -> str:
    data = read_input(path, max_bytes=MAX_TASK_FILE_BYTES, what="task file", size="64 MB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UsageError("not valid UTF-8", file=path, line=line) from None


def _parse(text: str, path: Path, number: int) -> tuple[dict[str, Any], BatchTask]:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"not a JSON object: {exc.msg}", file=path, line=number) from None
    if not isinstance(raw, dict):
        raise UsageError("each line must be a JSON object", file=path, line=number)
    try:
        return raw, BatchTask.model_validate(raw)
    except ValidationError as exc:
        message, where = first_validation_error(exc, BatchTask)
        raise UsageError(
            message.removeprefix("Value error, "), file=path, line=number, field=where or None
        ) from None


def load_tasks(path: Path | str) -> list[BatchTask]:
    """Every task of the file, in order, each with its id; the first bad line is an error."""
    file = Path(path)
    tasks: list[BatchTask] = []
    seen: dict[str, int] = {}
    repeats: dict[str, int] = {}
    for number, text in enumerate(_read(file).splitlines(), start=1):
        if not text.strip():
            continue
        raw, task = _parse(text, file, number)
        if not task.id:
            base = _content_id(raw)
            repeats[base] = repeats.get(base, 0) + 1
            key = base if repeats[base] == 1 else f"{base}-{repeats[base]}"
            task = task.model_copy(update={"id": key})
        if task.id in seen:
            raise UsageError(
                f"duplicate id {task.id!r} (first on line {seen[task.id]})",
                file=file, line=number, field="id",
            )  # fmt: skip
        seen[task.id] = number
        tasks.append(task)
    if not tasks:
        raise UsageError("no tasks (one JSON object per line)", file=file)
    return tasks
