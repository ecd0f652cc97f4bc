"""What a run knows about its model: window, output cap, output mode, server.

Precedence of the window: the ``--window`` flag, the model's ``models:`` entry in
``.personae/config.yaml`` (``context_window``), what the server tells
(:mod:`personae.models.servers`), then personae's table of known models. A window
from the table for a model served by the user's own server, or for a name the table
does not know, is a guess: runs warn once.

The output cap (``max_tokens`` on every request) is the entry's ``max_output``, else
a quarter of the window (at least 128, at most 4,096 tokens).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from personae.models.output import OutputMode
from personae.models.servers import ServerKind

__all__ = ["ModelConfig", "ModelFacts", "output_reserve"]


class ModelConfig(BaseModel):
    """One ``models:`` entry of the project config (keyed by ``provider:name`` or name)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    context_window: int | None = Field(default=None, ge=256, le=100_000_000)
    """The model's window on its server, in tokens (input plus output)."""
    max_output: int | None = Field(default=None, ge=16, le=1_000_000)
    """Most tokens one answer may have (sent as ``max_tokens``)."""
    output_mode: OutputMode | None = None
    """How plans and verdicts are asked for: ``tool``, ``native`` or ``prompted``."""
    server: ServerKind | None = None
    """Which server serves it, when discovery cannot tell."""


def output_reserve(window: int) -> int:
    """The default output cap for a window: a quarter of it, 128 to 4,096 tokens."""
    return max(128, min(4096, window // 4))


@dataclass(frozen=True, kw_only=True)
class ModelFacts:
    """What the run uses for one model."""

    label: str
    """The model's label (``provider:name``)."""
    window: int
    """Its context window in tokens."""
    window_source: str
    """Where the window came from (``--window``, ``config``, ``the server's /props``,
    ``personae's model table`` ...)."""
    guessed: bool
    """The window is a guess (runs warn once)."""
    max_output: int
    """``max_tokens`` sent on every request."""
    output_mode: OutputMode
    """How structured output is asked for."""
    server: ServerKind | None
    """The server kind (``None``: not known)."""
    base_url: str | None
    """Where requests go (``None``: the provider's default)."""

    @property
    def where(self) -> str:
        """The server for messages: ``llama-cpp-python at http://...`` or the provider."""
        kind = self.server or "server"
        return f"{kind} at {self.base_url}" if self.base_url else kind
