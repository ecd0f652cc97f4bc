"""Process-wide settings from the environment (``PERSONAE_`` prefix).

Read only at the edges (the CLI and the mind server); library code takes
explicit arguments instead. A bad value is a :class:`~personae.errors.ConfigError`
naming the variable (``PERSONAE_BUDGET_SHARE: ...``), never a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, SettingsConfigDict

from personae.errors import ConfigError
from personae.limits import DEFAULTS
from personae.models.resolve import parse_model_spec

__all__ = ["PersonaeSettings", "chosen_model"]

_PREFIX = "PERSONAE_"


def _describe(exc: ValidationError) -> str:
    """``PERSONAE_X: message (got 'value')`` for each bad variable, joined by ``; ``."""
    parts = []
    for err in exc.errors():
        name = _PREFIX + "_".join(str(p) for p in err["loc"]).upper()
        value = err.get("input")
        shown = isinstance(value, str) and repr(value) not in err["msg"]
        got = f" (got {value!r})" if shown else ""
        parts.append(f"{name}: {err['msg']}{got}")
    return "; ".join(parts)


class PersonaeSettings(BaseSettings):
    """Settings read from ``PERSONAE_*`` environment variables."""

    model_config = SettingsConfigDict(env_prefix=_PREFIX, extra="ignore", frozen=True)

    model: str | None = None
    """Default model as ``provider:name`` (``PERSONAE_MODEL``); ``None`` means not configured."""

    budget_share: float = Field(default=DEFAULTS.budget_share, gt=0, le=1)
    """Share of the model's context window the assembled context may use."""

    max_retries: int = Field(default=DEFAULTS.max_retries, ge=0)
    """Retries per subtask before the budget is exhausted."""

    handover_timeout: float = Field(default=DEFAULTS.handover_timeout, gt=0)
    """Seconds a handover child run may take before it is killed (``handover run``,
    ``run --context-from``, a team's handover tool; workflow steps and batch tasks take
    theirs from the workflow file and ``--timeout``)."""

    handover_dir: Path | None = None
    """A user-level folder new handover files go to (``PERSONAE_HANDOVER_DIR``, e.g.
    ``~/.personae/handovers``) instead of the project's ``.personae/handovers``;
    ``handover create --handover-dir`` overrides it, ``--out`` names the file itself."""

    otel_endpoint: str | None = None
    """OTLP/HTTP endpoint each run is exported to as a trace (``PERSONAE_OTEL_ENDPOINT``);
    ``None``: no telemetry (nothing of OpenTelemetry is imported)."""

    database_url: str | None = None
    """PostgreSQL store for every project (``PERSONAE_DATABASE_URL``, docs/postgres.md);
    ``None``: each project's SQLite file (or its config's ``database_url``)."""

    def __init__(self, **values: Any) -> None:
        """Read the environment; a bad ``PERSONAE_*`` value raises ConfigError naming it."""
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise ConfigError(_describe(exc)) from None

    @field_validator("model", mode="before")
    @classmethod
    def _check_model(cls, value: object) -> object:
        """Blank means unset; anything else must parse as ``provider:name``."""
        if not isinstance(value, str):
            return value
        if not value.strip():
            return None

        try:
            parse_model_spec(value, source="PERSONAE_MODEL")
        except ConfigError as exc:
            raise PydanticCustomError("model_spec", exc.message) from None
        return value.strip()


def chosen_model(
    flag: str | None, settings: PersonaeSettings, config_model: str | None
) -> tuple[str | None, str]:
    """A run's default model and where it comes from: the ``--model`` flag (or the Python
    API's ``model``), else ``PERSONAE_MODEL``, else the project config's ``model``
    (``(None, "none")``: none of them)."""
    for value, source in (
        (flag, "--model"), (settings.model, "PERSONAE_MODEL"), (config_model, "config"),
    ):  # fmt: skip
        if value:
            return value, source
    return None, "none"
