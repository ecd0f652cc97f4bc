"""Bounds on every model call of a run: output cap, per-role timeout, run deadline.

Every request carries ``max_tokens`` (the model's output cap, see
:class:`~personae.models.facts.ModelFacts`); each role's call has a timeout; the run
has a deadline after which no request starts (the run stops as with a usage cap:
what is not done is reported, never invented). A server's error becomes one line
naming the role, the model and the server; a context overflow names the window and
the fix.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.exceptions import ModelAPIError, ModelHTTPError, UsageLimitExceeded

from personae.errors import RunError
from personae.limits import DEFAULTS
from personae.models.facts import ModelFacts
from personae.models.servers import overflow_window

__all__ = [
    "CallBounds",
    "CallTimeoutError",
    "ContextOverflowError",
    "ServerError",
    "server_error",
]

_ROLE_TIMEOUTS: dict[str, float] = {
    "manager": DEFAULTS.manager_timeout,
    "worker": DEFAULTS.worker_timeout,
    "validator": DEFAULTS.validator_timeout,
    "subagent": DEFAULTS.worker_timeout,
    "summarizer": DEFAULTS.manager_timeout,
}


class ContextOverflowError(RunError):
    """The server refused a request longer than the model's window."""


class CallTimeoutError(TimeoutError):
    """A role's model call took longer than its timeout."""


class ServerError(ModelAPIError):
    """A model server answered with an error (one line: role, model, server, status)."""


@dataclass(kw_only=True)
class CallBounds:
    """The timeouts and the deadline of one run."""

    timeouts: Mapping[str, float] = field(default_factory=dict)
    """Seconds a call of each role may take (missing roles: the defaults)."""
    deadline: float | None = None
    """Seconds the whole run may take (``None``: no deadline)."""
    started: float = field(default_factory=time.monotonic)
    """When the run started (``time.monotonic()``)."""

    def timeout_for(self, role: str, asked: float | None = None) -> float:
        """Seconds a ``role`` call may take now: its timeout (or ``asked``), never past the
        deadline. Raises ``UsageLimitExceeded`` when the deadline has passed."""
        limit = asked if asked is not None else self.timeouts.get(role, _ROLE_TIMEOUTS[role])
        left = self.left()
        if left is None:
            return limit
        if left <= 0:
            raise UsageLimitExceeded(self.deadline_message())
        return min(limit, left)

    def left(self) -> float | None:
        """Seconds left before the deadline (``None``: no deadline)."""
        if self.deadline is None:
            return None
        return self.deadline - (time.monotonic() - self.started)

    def check(self) -> None:
        """Raise ``UsageLimitExceeded`` once the deadline has passed."""
        left = self.left()
        if left is not None and left <= 0:
            raise UsageLimitExceeded(self.deadline_message())

    def deadline_message(self) -> str:
        """Why the run stopped at its deadline."""
        return f"run deadline of {self.deadline:g} s reached (--deadline)"


def _excerpt(body: Any) -> str:
    if isinstance(body, dict):
        error = body.get("error", body)
        body = error.get("message", error) if isinstance(error, dict) else error
    text = " ".join(str(body).split())
    return text if len(text) <= 240 else text[:240] + "..."


def server_error(exc: ModelHTTPError, role: str, facts: ModelFacts) -> Exception:
    """The error to raise for a server's HTTP error: a context overflow (with the window
    and the fix), or one line naming the role, the model and the server."""
    text = _excerpt(exc.body if exc.body is not None else exc.message)
    window = overflow_window(str(exc.body)) if exc.status_code in (400, 413, 500) else None
    if window is not None:
        return ContextOverflowError(
            f"the {role}'s request does not fit the {window:,}-token window of "
            f"{facts.label} ({facts.where}; personae assumed {facts.window:,} from "
            f"{facts.window_source}): pass --window {window} or set context_window: {window} "
            f"in the model's models: entry of .personae/config.yaml",
            window=window,
            role=role,
        )
    return ServerError(
        facts.label,
        f"the {role}'s request to {facts.label} ({facts.where}) failed: HTTP "
        f"{exc.status_code}: {text}",
    )
