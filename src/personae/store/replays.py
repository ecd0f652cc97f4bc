"""What a run was started with, and which run a replay re-ran (migration 0011).

A run's *inputs* are what shapes it besides its task and model: the persona, the context
profile, the handover text it continued, the conversation's position when it started and
the project's files by hash. They are stored at the run's start, so a replay
(:mod:`personae.team.replay`) can rebuild what the run saw. A replay's *link* says which run
it re-ran, from which call on it asked a model, against which model or persona prompt, and
how many calls it served from the record.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from personae.security.policy import redact_secrets
from personae.store.db import Store

__all__ = ["RecordedCall", "ReplayLink", "ReplayStore", "RunInputs"]


class RunInputs(BaseModel):
    """What a run was started with (besides its task and model)."""

    model_config = ConfigDict(frozen=True)

    persona: str | None = None
    """Active persona."""
    profile: str | None = None
    """Context profile asked for (``None``: the persona's, else the worker profile)."""
    handover_text: str | None = None
    """The rendered handover section the run continued (``None``: none)."""
    include_git_log: bool = True
    """Recent commits were added to the context."""
    budget_share: float | None = None
    """Share of the model window the assembled context could use."""
    max_retries: int | None = None
    """Corrections per subtask."""
    request_cap: int | None = None
    """Most model requests of the whole tree (``None``: no cap)."""
    model_window: int | None = None
    """The ``--window`` given (``None``: discovered or looked up)."""
    session_id: str | None = None
    """Conversation session."""
    history_seq: int = 0
    """The session's last message when the run started (the run saw messages up to it)."""
    files: dict[str, str] = Field(default_factory=dict)
    """The project's files when the run started: relative path -> sha256."""
    files_complete: bool = True
    """``False``: the project was larger than what is recorded (see ``files_note``)."""
    files_note: str = ""
    """Why the file list is incomplete."""


class ReplayLink(BaseModel):
    """How a replay run re-ran another run."""

    model_config = ConfigDict(frozen=True)

    of: str
    """The run replayed."""
    from_call: int
    """First call asked of a model; calls before it were answered from the record."""
    model: str | None = None
    """The model given for the live calls (``None``: the original's)."""
    persona_prompt: str | None = None
    """The persona prompt file given for the live calls (``None``: the original prompt)."""
    persona_prompt_sha256: str | None = None
    """Hash of that file's text."""
    recorded_calls: int = 0
    """Calls answered from the record."""
    diverged_at: int | None = None
    """First recorded call whose role differs from the original's (``None``: none did)."""
    project_drift: list[str] = Field(default_factory=list)
    """How the project the replay saw differs from what the original run saw."""


class RecordedCall(BaseModel):
    """A replay's model call answered from the record: its number and the original's."""

    model_config = ConfigDict(frozen=True)

    seq: int
    """The call's number in the replay run."""
    original_seq: int
    """The call it was answered from, in the original run."""
    model: str
    """The original call's model."""


class ReplayStore:
    """Table access for run inputs and replay links (columns of ``runs``)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def save_inputs(self, run_id: str, inputs: RunInputs) -> None:
        """Store what run ``run_id`` was started with (secrets redacted)."""
        data = redact_secrets(inputs.model_dump(mode="json"))
        with self.store.transaction() as conn:
            conn.execute("UPDATE runs SET inputs_json=? WHERE id=?", (json.dumps(data), run_id))

    def inputs(self, run_id: str) -> RunInputs | None:
        """What the run was started with (``None``: stored before inputs were kept)."""
        row = self.store.fetchone("SELECT inputs_json FROM runs WHERE id=?", (run_id,))
        if row is None or row[0] is None:
            return None
        return RunInputs.model_validate(json.loads(row[0]))

    def link(self, run_id: str, link: ReplayLink) -> None:
        """Record that run ``run_id`` replays ``link.of``."""
        with self.store.transaction() as conn:
            conn.execute(
                "UPDATE runs SET replay_of=?, replay_json=? WHERE id=?",
                (link.of, link.model_dump_json(), run_id),
            )

    def link_of(self, run_id: str) -> ReplayLink | None:
        """How run ``run_id`` replayed another (``None``: it is no replay)."""
        row = self.store.fetchone("SELECT replay_json FROM runs WHERE id=?", (run_id,))
        if row is None or row[0] is None:
            return None
        return ReplayLink.model_validate_json(row[0])

    def replays_of(self, run_id: str) -> list[str]:
        """Runs that replay ``run_id``, oldest first."""
        rows = self.store.fetchall(
            "SELECT id FROM runs WHERE replay_of=? ORDER BY started_at", (run_id,)
        )
        return [r[0] for r in rows]

    def mark_recorded(self, run_id: str, calls: list[RecordedCall]) -> None:
        """Mark the replay's calls answered from the record: their model is the original
        call's, and their usage says which call of the original run they came from."""
        if not calls:
            return
        with self.store.transaction() as conn:
            for call in calls:
                row = conn.execute(
                    "SELECT usage_json FROM model_calls WHERE run_id=? AND seq=?",
                    (run_id, call.seq),
                ).fetchone()
                if row is None:
                    continue
                usage: dict[str, Any] = json.loads(row[0] or "{}")
                usage["recorded_from"] = call.original_seq
                conn.execute(
                    "UPDATE model_calls SET model=?, usage_json=? WHERE run_id=? AND seq=?",
                    (call.model, json.dumps(usage), run_id, call.seq),
                )
