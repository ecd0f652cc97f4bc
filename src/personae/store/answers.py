"""The model's answer to one model call, as stored (migration 0007).

An answer is what came back from the model for one request: its text, the
tool calls it asked for (name and arguments; structured output arrives as a
tool call too) and why it stopped. :meth:`ModelAnswer.build` redacts secrets
(:func:`personae.security.redact`) and caps the size before anything is stored;
a cut piece ends with a visible notice saying how much was left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from personae.security.redact import redact_text, redact_value

__all__ = ["ANSWER_PIECE_CAP", "ANSWER_TOOL_CALL_CAP", "AnswerToolCall", "ModelAnswer"]

ANSWER_PIECE_CAP = 8000
"""Most characters kept of the answer's text and of each tool call's arguments."""
ANSWER_TOOL_CALL_CAP = 50
"""Most tool calls kept of one answer."""


def _cap(text: str, limit: int = ANSWER_PIECE_CAP) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    notice = f"\n[… answer cut: {len(text) - limit} more characters not stored]"
    return text[:limit] + notice, True


class AnswerToolCall(BaseModel):
    """One tool call the model asked for."""

    model_config = ConfigDict(frozen=True)

    name: str
    """Tool name (``final_result`` and the like carry structured output)."""
    args: str
    """Arguments as JSON text (redacted, capped)."""


class ModelAnswer(BaseModel):
    """What the model answered to one request (redacted, capped)."""

    model_config = ConfigDict(frozen=True)

    text: str = ""
    """The answer's text parts, joined (redacted, capped)."""
    tool_calls: list[AnswerToolCall] = Field(default_factory=list)
    """Tool calls asked for, in order."""
    finish_reason: str | None = None
    """Why the model stopped (``stop``, ``tool_call``, ``length`` ...), when reported."""
    chars: int = 0
    """Characters of text and arguments the model sent (before redaction and the cap)."""
    cut: bool = False
    """Something was cut to the cap (the cut piece says how much)."""

    @classmethod
    def build(
        cls,
        *,
        text: str | None,
        tool_calls: Iterable[tuple[str, str | dict[str, Any] | None]] = (),
        finish_reason: str | None = None,
    ) -> ModelAnswer:
        """An answer from raw parts: every piece redacted, then capped."""
        raw_text = text or ""
        chars = len(raw_text)
        kept_text, cut = _cap(redact_text(raw_text))
        calls: list[AnswerToolCall] = []
        dropped = 0
        for name, args in tool_calls:
            raw = args if isinstance(args, str) else json.dumps(args or {}, default=str)
            chars += len(raw)
            if len(calls) >= ANSWER_TOOL_CALL_CAP:
                dropped += 1
                continue
            kept, was_cut = _cap(_redact_args(raw))
            cut = cut or was_cut
            calls.append(AnswerToolCall(name=redact_text(name), args=kept))
        if dropped:
            cut = True
            calls.append(
                AnswerToolCall(
                    name="[… answer cut]", args=f"{dropped} more tool call(s) not stored"
                )
            )
        return cls(
            text=kept_text,
            tool_calls=calls,
            finish_reason=finish_reason,
            chars=chars,
            cut=cut,
        )


def _redact_args(raw: str) -> str:
    """Arguments with secrets removed; secret-named keys lose their values whole."""
    try:
        parsed = json.loads(raw)
    except ValueError:
        return redact_text(raw)
    return json.dumps(redact_value(parsed), ensure_ascii=False)
