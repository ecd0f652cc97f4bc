"""Process-wide settings from the environment (``PERSONAE_`` prefix).

Read only at the edges (the CLI and the mind server); library code takes
explicit arguments instead.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["PersonaeSettings"]


def _default_home() -> Path:
    return Path.home() / ".personae"


class PersonaeSettings(BaseSettings):
    """Settings read from ``PERSONAE_*`` environment variables."""

    model_config = SettingsConfigDict(env_prefix="PERSONAE_", extra="ignore", frozen=True)

    home: Path = Field(default_factory=_default_home)
    """User data directory (``PERSONAE_HOME``)."""

    model: str | None = None
    """Default model as ``provider:name`` (``PERSONAE_MODEL``); ``None`` means not configured."""

    budget_share: float = Field(default=0.30, gt=0, le=1)
    """Share of the model's context window the assembled context may use."""

    max_retries: int = Field(default=2, ge=0)
    """Retries per subtask before the budget is exhausted."""

    handover_timeout: float = Field(default=300.0, gt=0)
    """Seconds a handover child run may take before it is killed."""
