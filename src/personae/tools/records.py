"""The record of one tool call and the log of a run's calls (one type for tools and team)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from personae.limits import cut_strings
from personae.tools.canonical import canonical_args as _canonical

__all__ = ["CallLog", "ToolCallRecord"]

RESULT_KEEP = 2000
"""Characters of a result a record keeps in :attr:`ToolCallRecord.result`."""


def shorten(text: str) -> str:
    """``text`` cut to :data:`RESULT_KEEP` characters, saying how much was left out."""
    if len(text) <= RESULT_KEEP:
        return text
    return text[:RESULT_KEEP] + f"... [{len(text) - RESULT_KEEP} more chars]"


_DISPATCH_DETAILS = {"canonical_args", "result_preview", "error", "duration_s"}


def _preview(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


class ToolCallRecord(BaseModel):
    """One tool call an agent made (dispatched, refused or answered from an earlier call)."""

    model_config = ConfigDict(frozen=True)

    tool: str
    """Tool name the model used."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Arguments as called, every string cut to :data:`personae.limits.ARG_KEEP_CHARS`
    (marked), so that events and stores keep a bounded copy."""
    ok: bool = True
    """False when the tool failed or was refused."""
    result: str = ""
    """Result text (or error message), shortened."""
    persona: str = ""
    """Who called it."""
    reused: bool = False
    """Answered from an identical earlier call of this turn (not run again)."""
    refused: bool = False
    """Refused at dispatch: the tool is not one this agent may use (never ran)."""
    canonical_args: str = ""
    """:func:`~personae.tools.canonical.canonical_args` of ``args`` (for loop detection)."""
    result_preview: str = ""
    """Start of the result (or of the error message)."""
    error: str | None = None
    """The full error message when the call failed."""
    duration_s: float = 0.0
    """Wall-clock seconds the call took."""

    @classmethod
    def made(
        cls,
        tool: str,
        args: dict[str, Any],
        *,
        ok: bool,
        text: str,
        started: float | None = None,
        preview_chars: int = 400,
        **extra: Any,
    ) -> ToolCallRecord:
        """A record of a finished call: ``text`` is the result, or the error when not ``ok``.

        ``started`` is the call's :func:`time.monotonic` start; ``extra`` sets
        ``persona``, ``reused``, ``refused`` or ``error``.
        """
        try:
            canonical = _canonical(args)
        except (TypeError, ValueError):
            canonical = repr(args)
        if not ok:
            extra.setdefault("error", text)
        return cls(
            tool=tool,
            args=cut_strings(args),
            ok=ok,
            result=shorten(text),
            canonical_args=canonical,
            result_preview=_preview(text, preview_chars),
            duration_s=0.0 if started is None else time.monotonic() - started,
            **extra,
        )

    def brief(self) -> dict[str, Any]:
        """The record as a run's ``work_result`` event stores it (without the dispatch
        details ``canonical_args``, ``result_preview``, ``error`` and ``duration_s``)."""
        return self.model_dump(exclude=_DISPATCH_DETAILS)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the record."""
        data = self.model_dump(mode="json")
        data["duration_s"] = round(self.duration_s, 6)
        return data


@dataclass(kw_only=True)
class CallLog:
    """Calls made by one agent run (a worker attempt, a sub-agent, a subset's dispatches)."""

    calls: list[ToolCallRecord] = field(default_factory=list)
    """Every call, in order."""
    loop_detected: bool = False
    """A repeated identical call was refused."""

    def add(
        self, record: ToolCallRecord, on_call: Callable[[ToolCallRecord], None] | None = None
    ) -> None:
        """Append ``record`` and pass it to ``on_call``."""
        self.calls.append(record)
        if on_call is not None:
            on_call(record)

    @property
    def failed(self) -> list[ToolCallRecord]:
        """Calls that failed (or were refused)."""
        return [c for c in self.calls if not c.ok]

    @property
    def tools_used(self) -> list[str]:
        """Distinct tools called successfully, first-use order."""
        return list(dict.fromkeys(c.tool for c in self.calls if c.ok))
