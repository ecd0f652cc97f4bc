"""A personae project: the ``.personae/`` folder of a working directory and its config.

``.personae/config.yaml`` is optional; every field has a default. Each part of
personae owns one section of the config.

Commands find their project like git finds its repository: :func:`find_root` walks up
from the current folder to the nearest folder holding ``.personae/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from personae.errors import ConfigError, first_validation_error, yaml_error_line
from personae.fsutil import read_regular
from personae.layout import GRANTABLE, MAX_CONFIG_BYTES, Layout, find_root
from personae.models.facts import ModelConfig
from personae.models.resolve import parse_model_spec
from personae.pricing import Price, PriceTable

__all__ = [
    "CommandsConfig",
    "HandoverConfig",
    "LimitsConfig",
    "PriceConfig",
    "Project",
    "ProjectConfig",
    "SandboxConfig",
    "TimeoutsConfig",
    "find_root",
]


class CommandsConfig(BaseModel):
    """``!command`` injection in profile and skill text (off unless enabled)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False
    """Run ``!command`` lines at all."""
    allow: list[str] = Field(default_factory=list)
    """Allowed commands (the program name, first word of the line)."""
    timeout: float = Field(default=5.0, gt=0)
    """Seconds each command may run."""
    max_output: int = Field(default=4000, ge=0)
    """Characters of output kept from each command."""


class HandoverConfig(BaseModel):
    """Handover safety settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    allowed_roots: list[Path] = Field(default_factory=list)
    """Extra roots artifact paths may live in (besides cwd, the handover dir and temp)."""
    env_allow: list[str] = Field(default_factory=list)
    """Extra environment variables a handover may capture and carry."""
    mcp_reconnect: Literal["project", "handover", "none"] = "project"
    """Which of the source's MCP servers a receiving run starts (its persona must allow
    each): ``project`` those configured here, with this project's entry; ``handover``
    also those configured only in the handover file (its command runs); ``none``."""


class SandboxConfig(BaseModel):
    """The ``run_shell`` sandbox (bubblewrap); see docs/tools.md."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["auto", "required", "off"] = "auto"
    """``auto``: sandbox when bubblewrap works, else warn once per run; ``required``; ``off``."""
    network: bool = False
    """Let sandboxed commands use the network (a persona can also allow it)."""
    allow_paths: list[str] = Field(default_factory=list)
    """Paths under the user's home commands may read (``~/...`` or absolute)."""
    control_write: dict[str, list[str]] = Field(default_factory=dict)
    """Persona name -> control paths it may write (``.git``, ``CLAUDE.md`` ...; never
    ``.personae``). Every other control path is read-only to every persona."""

    @field_validator("control_write")
    @classmethod
    def _check_control_write(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        """Only grantable names (checked when the file is read)."""
        for persona, names in value.items():
            for name in names:
                if name not in GRANTABLE:
                    raise PydanticCustomError(
                        "control_write",
                        "persona {persona!r}: {name!r} cannot be granted; grantable: {names}",
                        {"persona": persona, "name": name, "names": ", ".join(GRANTABLE)},
                    )
        return value


class TimeoutsConfig(BaseModel):
    """Seconds each role's model call may take, and the whole run (``timeouts:``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    manager: float | None = Field(default=None, gt=0, le=86_400)
    """One Manager call (plan, decomposition, synthesis)."""
    worker: float | None = Field(default=None, gt=0, le=86_400)
    """One Worker call, all its steps."""
    validator: float | None = Field(default=None, gt=0, le=86_400)
    """One Validator call (past it: not validated, never approval)."""
    run: float | None = Field(default=None, gt=0, le=604_800)
    """The run's deadline: no model request starts after it."""

    def per_role(self) -> dict[str, float]:
        """The roles' timeouts that are set."""
        roles = {"manager": self.manager, "worker": self.worker, "validator": self.validator}
        return {role: value for role, value in roles.items() if value is not None}


class PriceConfig(BaseModel):
    """The price of one model (``prices:``), per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0, allow_inf_nan=False)
    """Per million input tokens."""
    output: float = Field(ge=0, allow_inf_nan=False)
    """Per million output tokens."""


class LimitsConfig(BaseModel):
    """Caps on a run and every run it starts (``limits:``); the flags win when tighter."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tokens_total: int | None = Field(default=None, gt=0)
    """Most tokens (input plus output) the whole tree of runs may use."""
    max_cost: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Most cost the whole tree may spend (needs a price for every model it calls)."""
    max_requests: int | None = Field(default=None, gt=0)
    """Most model calls the whole tree may make."""


class ProjectConfig(BaseModel):
    """The contents of ``.personae/config.yaml``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = None
    """Default model for this project (``provider:name``); ``PERSONAE_MODEL`` wins over it."""
    base_url: str | None = None
    """Base URL of an OpenAI-compatible server (Ollama, vLLM, llama.cpp)."""
    otel_endpoint: str | None = None
    """OTLP/HTTP endpoint runs are exported to as traces; ``PERSONAE_OTEL_ENDPOINT`` wins."""
    database_url: str | None = None
    """PostgreSQL store (``postgresql://...``, docs/postgres.md); ``PERSONAE_DATABASE_URL`` wins."""
    models: dict[str, ModelConfig] = Field(default_factory=dict)
    """Per model (``provider:name`` or name): ``context_window``, ``max_output``,
    ``output_mode``, ``server`` (see docs/local-models.md)."""
    timeouts: TimeoutsConfig = Field(default_factory=TimeoutsConfig)
    prices: dict[str, PriceConfig] = Field(default_factory=dict)
    """Per model (``provider:name`` or name): ``input`` and ``output`` price per million
    tokens; a model without one has an unknown cost (``runs show --tree``, ``--max-cost``)."""
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    commands: CommandsConfig = Field(default_factory=CommandsConfig)
    handover: HandoverConfig = Field(default_factory=HandoverConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)

    @field_validator("model")
    @classmethod
    def _check_model(cls, value: str | None) -> str | None:
        """``model`` must parse as ``provider:name`` (checked when the file is read)."""
        if value is None:
            return None

        try:
            parse_model_spec(value, source="model")
        except ConfigError as exc:
            raise PydanticCustomError("model_spec", exc.message) from None
        return value


@dataclass(frozen=True, kw_only=True)
class Project:
    """A working directory with (possibly) a ``.personae/`` folder."""

    root: Path
    """The working directory (resolved)."""
    config: ProjectConfig
    """The loaded project config (defaults when there is no file)."""

    @property
    def layout(self) -> Layout:
        """Where this project keeps its files."""
        return Layout(self.root)

    @property
    def dir(self) -> Path:
        """The ``.personae/`` folder (may not exist)."""
        return self.layout.dir

    @property
    def state_db(self) -> Path:
        """Path of the project's SQLite store."""
        return self.layout.state_db

    @classmethod
    def open(cls, root: Path | str = ".") -> Project:
        """Open the project at ``root``, reading its config if present."""
        resolved = Path(root).resolve()
        return cls(root=resolved, config=load_config(Layout(resolved)))

    def price_table(self) -> PriceTable:
        """The config's ``prices:`` as a :class:`~personae.pricing.PriceTable`."""
        return PriceTable(
            {name: Price(input=p.input, output=p.output) for name, p in self.config.prices.items()}
        )

    @classmethod
    def discover(cls, start: Path | str = ".") -> Project:
        """Open the project ``start`` belongs to: :func:`find_root`, else ``start`` itself."""
        return cls.open(find_root(start) or start)


def load_config(layout: Layout) -> ProjectConfig:
    """Read the project config of ``layout``; defaults when there is none."""
    path = layout.config_file  # a FIFO or device named config.yaml is read, and refused
    return ProjectConfig() if path is None else _parse_config(path)


def _parse_config(path: Path) -> ProjectConfig:
    try:
        raw: Any = yaml.safe_load(read_regular(path, max_bytes=MAX_CONFIG_BYTES).decode("utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config: {exc.strerror}", file=path) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {exc.start})", file=path) from None
    except yaml.YAMLError as exc:
        raise ConfigError("malformed YAML", file=path, line=yaml_error_line(exc)) from exc
    if raw is None:
        return ProjectConfig()
    if not isinstance(raw, dict):
        raise ConfigError("config must be a mapping", file=path)
    try:
        return ProjectConfig.model_validate(raw)
    except ValidationError as exc:
        message, field = first_validation_error(exc)
        raise ConfigError(message, file=path, field=field) from exc
