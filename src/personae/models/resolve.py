"""``provider:name`` model specs -> pydantic-ai models.

Specs: ``openai:gpt-4o``, ``anthropic:claude-sonnet-4-5``, ``ollama:llama3``
(or any OpenAI-compatible server via a base URL: ``OPENAI_BASE_URL`` or the
project config ``base_url``), ``scripted:<scenario.yaml>`` (the scripted
loopback server; not a real model). Resolution order for the default model:
``--model`` flag, ``PERSONAE_MODEL``, project config ``model``. A persona's
``model`` overrides the default for that persona; Claude Code aliases
(``sonnet``, ``opus``, ``haiku``) map to Anthropic models and ``inherit``
means the default.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from personae.errors import ConfigError, ModelNotConfiguredError, closest_name
from personae.models import learned
from personae.models._http import shared_tls_client
from personae.models.early import EarlyRequest
from personae.models.facts import ModelConfig, ModelFacts, output_reserve
from personae.models.output import OutputMode, default_output_mode
from personae.models.servers import (
    OVERFLOW_SOURCE,
    SERVER_KINDS,
    ServerFacts,
    ServerKind,
    discover,
)

__all__ = [
    "CLAUDE_ALIASES",
    "PROVIDERS",
    "Endpoint",
    "ModelResolver",
    "ModelSpec",
    "endpoint_for",
    "parse_model_spec",
]

CLAUDE_ALIASES: dict[str, str] = {
    "sonnet": "anthropic:claude-sonnet-4-5",
    "opus": "anthropic:claude-opus-4-1",
    "haiku": "anthropic:claude-haiku-4-5",
}
"""Claude Code ``model:`` aliases -> personae specs."""

PROVIDERS = ("openai", "anthropic", "openai-compatible", "ollama", "scripted")
"""Known provider prefixes."""

_HOW_TO = (
    "no model configured: pass --model provider:name (e.g. openai:gpt-4o, "
    "anthropic:claude-sonnet-4-5, ollama:llama3), set PERSONAE_MODEL, or add "
    "'model: provider:name' to .personae/config.yaml; try 'personae demo' for an offline "
    "run with the scripted replay server"
)


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A parsed ``provider:name``."""

    provider: str
    """One of :data:`PROVIDERS`."""
    name: str
    """Model name (or scenario path for ``scripted``)."""

    def __str__(self) -> str:
        return f"{self.provider}:{self.name}"

    @property
    def is_scripted(self) -> bool:
        """True for the scripted loopback model (not a real model)."""
        return self.provider == "scripted"

    @property
    def scenario_path(self) -> Path:
        """The scenario file of a ``scripted:`` spec (``~`` is the user's home)."""
        return Path(self.name).expanduser()


def parse_model_spec(spec: str, *, source: str = "--model") -> ModelSpec:
    """Parse ``provider:name`` (Claude Code aliases accepted)."""
    text = spec.strip()
    text = CLAUDE_ALIASES.get(text, text)
    provider, sep, name = text.partition(":")
    if not sep or not name.strip() or not provider:
        raise ConfigError(
            f"model {spec!r} must look like provider:name (providers: {', '.join(PROVIDERS)})",
            field=source,
        )
    if provider not in PROVIDERS:
        near = closest_name(provider, PROVIDERS)
        hint = f"; did you mean {near!r}?" if near else ""
        raise ConfigError(
            f"unknown model provider {provider!r}{hint} (valid: {', '.join(PROVIDERS)})",
            field=source,
        )
    return ModelSpec(provider=provider, name=name.strip())


_OPENAI_URL = "https://api.openai.com/v1"
_ANTHROPIC_URL = "https://api.anthropic.com/v1"
_OLLAMA_URL = "http://127.0.0.1:11434/v1"


@dataclass(frozen=True, kw_only=True)
class Endpoint:
    """The server a spec talks to."""

    provider: str
    """``openai``, ``anthropic``, ``ollama``, ``openai-compatible`` or ``scripted``."""
    base_url: str | None
    """Base URL requests go to (``None``: scripted, served on a fresh loopback port per run;
    or openai-compatible without a URL)."""
    key_env: str | None
    """Environment variable holding the API key (``None``: no key used)."""
    key_required: bool
    """Runs fail without the key."""

    @property
    def key(self) -> str | None:
        """The key from the environment (``None`` when unset or blank)."""
        value = os.environ.get(self.key_env) if self.key_env else None
        return value if value and value.strip() else None


def endpoint_for(spec: ModelSpec, *, config_base_url: str | None = None) -> Endpoint:
    """The endpoint ``spec`` resolves to: the rules :class:`ModelResolver` builds models by
    and ``personae doctor`` checks them by."""
    if spec.provider == "scripted":
        return Endpoint(provider="scripted", base_url=None, key_env=None, key_required=False)
    if spec.provider == "anthropic":
        url = os.environ.get("ANTHROPIC_BASE_URL") or _ANTHROPIC_URL
        return Endpoint(
            provider="anthropic",
            base_url=url.rstrip("/") + ("" if url.rstrip("/").endswith("/v1") else "/v1"),
            key_env="ANTHROPIC_API_KEY",
            key_required=True,
        )
    base = os.environ.get("OPENAI_BASE_URL") or config_base_url
    if spec.provider == "ollama":
        base = os.environ.get("OLLAMA_BASE_URL") or base or _OLLAMA_URL
        return Endpoint(provider="ollama", base_url=base, key_env=None, key_required=False)
    return Endpoint(
        provider=spec.provider,
        base_url=base or (_OPENAI_URL if spec.provider == "openai" else None),
        key_env="OPENAI_API_KEY",
        key_required=base is None,  # a local server (base URL set) takes any key
    )


@dataclass(kw_only=True)
class ModelResolver:
    """Turns specs into pydantic-ai models; caches one instance per spec.

    ``default`` is the run's default spec (``None``: not configured).
    ``base_url`` is the project config's OpenAI-compatible base URL.
    """

    default: str | None = None
    """Default spec for the run."""
    base_url: str | None = None
    """Base URL for ``openai``/``openai-compatible`` specs (config); env OPENAI_BASE_URL wins."""
    fixed: Any = None
    """A pydantic-ai model every persona uses (tests, benchmarks); overrides specs."""
    fixed_label: str = "fixed"
    """Label reported for ``fixed``."""
    entries: Mapping[str, ModelConfig] = field(default_factory=dict)
    """The project config's ``models:`` entries (by ``provider:name`` or name)."""
    window: int | None = None
    """The ``--window`` flag: every model's window (``None``: discovered or looked up)."""
    discover: bool = True
    """Ask servers the user runs for their window and kind (:func:`servers.discover`)."""
    _cache: dict[str, Any] = field(default_factory=dict)
    _facts: dict[str, ModelFacts] = field(default_factory=dict)
    _servers: list[Any] = field(default_factory=list)
    _scripted_urls: dict[str, str] = field(default_factory=dict)
    early: EarlyRequest | None = None
    """The run's first request when it was sent before the engine loaded
    (:meth:`send_early`); the default model's transport answers it."""

    @classmethod
    def using(cls, model: Any, label: str) -> ModelResolver:
        """A resolver that answers every persona with ``model`` (e.g. a FunctionModel)."""
        return cls(fixed=model, fixed_label=label)

    def spec_for(self, persona_model: str | None = None) -> ModelSpec:
        """The spec a persona runs with: its own model unless unset or ``inherit``."""
        if persona_model and persona_model.strip() not in ("", "inherit"):
            return parse_model_spec(persona_model, source="persona model")
        if not self.default:
            raise ModelNotConfiguredError(_HOW_TO)
        return parse_model_spec(self.default)

    def label(self, persona_model: str | None = None) -> str:
        """Display label of the model a persona runs with (``scripted:...`` for scripted)."""
        if self.fixed is not None:
            return self.fixed_label
        return str(self.spec_for(persona_model))

    def check(self, persona_model: str | None = None) -> ModelSpec | None:
        """Check the model a persona runs with, building nothing: the spec parses, a
        ``scripted:`` scenario loads, a provider has its base URL and API key.

        Raises the :class:`~personae.errors.ConfigError` a run would meet (``None``: a
        fixed model, nothing to check).
        """
        if self.fixed is not None:
            return None
        spec = self.spec_for(persona_model)
        if spec.provider == "scripted":
            # local import: the scenario reader loads only for a `scripted:` spec
            from personae.models.scenario import load_scenario

            load_scenario(spec.scenario_path)
        else:
            self._server(spec)
        return spec

    def _server(self, spec: ModelSpec) -> tuple[str, str | None]:
        """``(base URL, API key)`` a provider's spec talks to; a missing one is an error."""
        endpoint = endpoint_for(spec, config_base_url=self.base_url)
        if spec.provider == "anthropic" and endpoint.key is None:
            raise ConfigError("set ANTHROPIC_API_KEY to use anthropic models", field="model")
        if endpoint.base_url is None:  # openai-compatible without a URL
            raise ConfigError(
                "openai-compatible models need a base URL: set OPENAI_BASE_URL or "
                "'base_url:' in .personae/config.yaml",
                field="model",
            )
        if endpoint.key_required and endpoint.key is None:
            raise ConfigError(f"set {endpoint.key_env} to use openai models", field="model")
        return endpoint.base_url, endpoint.key

    def model(self, persona_model: str | None = None) -> Any:
        """The pydantic-ai model for a persona (or the default)."""
        if self.fixed is not None:
            return self.fixed
        spec = self.spec_for(persona_model)
        key = str(spec)
        if key not in self._cache:
            self._cache[key] = self._build(spec)
        return self._cache[key]

    def entry_for(self, persona_model: str | None = None) -> ModelConfig:
        """The ``models:`` entry of the model a persona runs with (empty when none)."""
        if self.fixed is not None:
            return self.entries.get(self.fixed_label) or ModelConfig()
        spec = self.spec_for(persona_model)
        return self.entries.get(str(spec)) or self.entries.get(spec.name) or ModelConfig()

    def facts(self, persona_model: str | None = None) -> ModelFacts:
        """Window, output cap, output mode and server of the model a persona runs with.

        Asks the server once per model (see :mod:`personae.models.servers`)."""
        label = self.label(persona_model)
        if label not in self._facts:
            self._facts[label] = self._learn(persona_model, label)
        return self._facts[label]

    def learned_window(self, persona_model: str | None, window: int) -> None:
        """Use a window learned during the run (from an overflow error) from now on, and
        remember it for the next run against the same server and model
        (:mod:`personae.models.learned`)."""
        label = self.label(persona_model)
        known = self._facts.get(label)
        if known is not None:
            self._facts[label] = ModelFacts(
                label=label, window=window, window_source=OVERFLOW_SOURCE, guessed=False,
                max_output=min(known.max_output, output_reserve(window)),
                output_mode=known.output_mode, server=known.server, base_url=known.base_url,
            )  # fmt: skip
        spec = self.spec_for(persona_model)
        url = known.base_url if known is not None else None
        if url is not None and spec.provider != "scripted":
            learned.remember(url, spec.name, window, known.server if known else None)

    def send_early(self, body: dict[str, Any]) -> EarlyRequest | None:
        """Send the default model's first request now, before the engine loads, when
        that model is one on a server the user runs (the local chat model): its answer
        then answers the engine's identical request (:mod:`personae.models.early`).
        ``body``: the chat request's JSON body, less ``model``. ``None``: not sent."""
        if self.fixed is not None or self.early is not None or self._cache:
            return None
        if type(self).model is not ModelResolver.model:  # its models answer some other way
            return None  # (a replay answers from the record first)
        spec = self.spec_for(None)
        if spec.provider not in ("openai", "openai-compatible", "ollama"):
            return None
        base_url, key = self._server(spec)
        if base_url == _OPENAI_URL:
            return None
        self.early = EarlyRequest.send(base_url, {"model": spec.name, **body}, key=key)
        return self.early

    def _learn(self, persona_model: str | None, label: str) -> ModelFacts:
        # local import: the token registry loads tokenizers' tables
        from personae.tokens.registry import model_info

        entry = self.entry_for(persona_model)
        provider, base_url, told = self._ask_server(persona_model)
        info = model_info(label)
        server: ServerKind | None = entry.server or told.kind
        if self.window is not None:
            window, source, guessed = self.window, "--window", False
        elif entry.context_window is not None:
            window, source, guessed = entry.context_window, "the config's models: entry", False
        elif told.window is not None:
            window, source, guessed = told.window, told.source, False
        else:
            hosted = provider in ("openai", "anthropic") and server in (None, "openai")
            known = info.pattern not in ("*",) and not info.pattern.endswith(":*")
            window, source = info.context_window, "personae's model table"
            guessed = not (hosted and known) and provider not in ("scripted", "fixed")
        mode: OutputMode = entry.output_mode or default_output_mode(provider, server)
        return ModelFacts(
            label=label, window=window, window_source=source, guessed=guessed,
            max_output=min(entry.max_output or output_reserve(window), window),
            output_mode=mode, server=server, base_url=base_url,
        )  # fmt: skip

    def _ask_server(self, persona_model: str | None) -> tuple[str, str | None, ServerFacts]:
        """The provider, base URL and what the server told (nothing for hosted APIs)."""
        nothing = ServerFacts(kind=None, window=None, source="")
        if self.fixed is not None:
            return "fixed", None, nothing
        spec = self.spec_for(persona_model)
        if spec.provider == "scripted":
            self.model(persona_model)  # starts the server
            url = self._scripted_urls.get(str(spec))
            if url is None:
                return "scripted", None, ServerFacts(kind="scripted", window=None, source="")
            return "scripted", url, discover(url, "scripted", timeout=3.0)
        endpoint = endpoint_for(spec, config_base_url=self.base_url)
        custom = endpoint.base_url is not None and endpoint.base_url not in (
            _OPENAI_URL, _ANTHROPIC_URL,
        )  # fmt: skip
        if not custom or not self.discover or endpoint.base_url is None:
            kind: ServerKind | None = "openai" if spec.provider == "openai" and not custom else None
            return spec.provider, endpoint.base_url, ServerFacts(kind=kind, window=None, source="")
        remembered = learned.recall(endpoint.base_url, spec.name)
        if remembered is not None:  # learned from this server's overflow error lately
            window, told_kind = remembered
            kind = told_kind if told_kind in SERVER_KINDS else None  # type: ignore[assignment]
            source = f"{OVERFLOW_SOURCE}, remembered"
            return spec.provider, endpoint.base_url, ServerFacts(kind=kind, window=window,
                                                                  source=source)  # fmt: skip
        told = discover(endpoint.base_url, spec.name, key=endpoint.key)
        if told.window is not None and told.source == OVERFLOW_SOURCE:
            learned.remember(endpoint.base_url, spec.name, told.window, told.kind)
        return spec.provider, endpoint.base_url, told

    def _build(self, spec: ModelSpec) -> Any:
        if spec.provider == "scripted":
            # local import: the scripted replay server loads only for a `scripted:` spec
            from personae.models.scripted import ScriptedServer

            server = ScriptedServer(spec.scenario_path).start()
            self._servers.append(server)
            if server.scenario.server is not None:  # it imitates a real server: ask it
                self._scripted_urls[str(spec)] = server.base_url
                return server.local_model()
            return server.model()
        base_url, key = self._server(spec)
        if spec.provider == "anthropic":
            # local import: a provider's SDK loads only when that provider is used
            from pydantic_ai.models.anthropic import AnthropicModel
            from pydantic_ai.providers.anthropic import AnthropicProvider

            # the SDK adds /v1/... itself: ANTHROPIC_BASE_URL works with or without /v1
            anthropic = AnthropicProvider(
                api_key=key, base_url=base_url.removesuffix("/v1"), http_client=shared_tls_client()
            )
            return AnthropicModel(spec.name, provider=anthropic)
        if base_url != _OPENAI_URL:  # a server the user runs: its habits are handled
            # local import: a provider's SDK loads only when that provider is used
            from personae.models.quirks import local_chat_model

            early = self.early if self.early is not None and spec == self.spec_for(None) else None
            return local_chat_model(spec.name, base_url, key, early=early)
        # local import: a provider's SDK loads only when that provider is used
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        # a server that takes no key (Ollama) is never sent one meant for another server
        provider = OpenAIProvider(
            base_url=base_url, api_key=key or "not-needed", http_client=shared_tls_client()
        )
        return OpenAIChatModel(spec.name, provider=provider)

    def close(self) -> None:
        """Stop any scripted servers this resolver started."""
        if self.early is not None:  # hung up on unless claimed (kept: what became of it)
            self.early.discard()
        for server in self._servers:
            server.stop()
        self._servers.clear()
        self._cache.clear()
        self._facts.clear()
        self._scripted_urls.clear()
