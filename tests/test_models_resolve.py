"""``provider:name`` -> pydantic-ai models; persona overrides; clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai.models.openai import OpenAIChatModel

from personae.errors import ConfigError, ModelNotConfiguredError
from personae.models import ModelResolver, parse_model_spec
from personae.models.resolve import endpoint_for


def test_parse_specs_and_aliases() -> None:
    assert str(parse_model_spec("openai:gpt-4o")) == "openai:gpt-4o"
    assert parse_model_spec("sonnet").provider == "anthropic"
    assert parse_model_spec("ollama:llama3:8b").name == "llama3:8b"
    with pytest.raises(ConfigError, match="did you mean 'openai'"):
        parse_model_spec("opnai:gpt-4o")
    with pytest.raises(ConfigError, match="provider:name"):
        parse_model_spec("gpt-4o")


def test_no_model_configured_says_how_to_set_one() -> None:
    with pytest.raises(ModelNotConfiguredError) as err:
        ModelResolver().model()
    message = str(err.value)
    for hint in ("--model", "PERSONAE_MODEL", ".personae/config.yaml", "personae demo"):
        assert hint in message


def test_openai_compatible_base_url_from_env_or_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="base URL"):
        ModelResolver(default="openai-compatible:qwen").model()
    model = ModelResolver(
        default="openai-compatible:qwen", base_url="http://127.0.0.1:9/v1"
    ).model()
    assert isinstance(model, OpenAIChatModel) and model.model_name == "qwen"
    assert str(model.client.base_url).startswith("http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8/v1")
    env_model = ModelResolver(default="openai:local", base_url="http://127.0.0.1:9/v1").model()
    assert str(env_model.client.base_url).startswith("http://127.0.0.1:8/v1")
    monkeypatch.delenv("OPENAI_BASE_URL")
    ollama = ModelResolver(default="ollama:llama3").model()
    assert str(ollama.client.base_url).startswith("http://127.0.0.1:11434/v1")


def test_persona_model_overrides_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-used")
    resolver = ModelResolver(default="ollama:llama3")
    assert resolver.label(None) == "ollama:llama3"
    assert resolver.label("inherit") == "ollama:llama3"
    assert resolver.label("haiku") == "anthropic:claude-haiku-4-5"
    # imported here, not at the top: the anthropic SDK costs each worker ~3 s at collection
    from pydantic_ai.models.anthropic import AnthropicModel

    assert isinstance(resolver.model("opus"), AnthropicModel)
    assert resolver.model("ollama:llama3") is resolver.model(None)  # cached per spec
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        ModelResolver(default="anthropic:claude-x").model()


def test_scripted_spec_starts_a_loopback_server(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("rules:\n  - text: hi\n")
    resolver = ModelResolver(default=f"scripted:{scenario}")
    model = resolver.model()
    assert isinstance(model, OpenAIChatModel)
    assert model.model_name.startswith("scripted")
    assert str(model.client.base_url).startswith("http://127.0.0.1:")
    assert resolver.label().startswith("scripted:")
    resolver.close()


@pytest.mark.parametrize(
    ("spec", "env", "config_url"),
    [
        ("openai:gpt-4o", {"OPENAI_API_KEY": "sk-openai"}, None),
        ("openai:local", {"OPENAI_BASE_URL": "http://127.0.0.1:8/v1"}, None),
        ("openai-compatible:qwen", {}, "http://127.0.0.1:9/v1"),
        ("ollama:llama3", {"OPENAI_API_KEY": "sk-openai"}, None),
        ("ollama:llama3", {"OLLAMA_BASE_URL": "http://127.0.0.1:7/v1"}, "http://127.0.0.1:9/v1"),
    ],
)
def test_runs_go_where_doctor_checks_with_the_key_it_names(
    monkeypatch: pytest.MonkeyPatch, spec: str, env: dict[str, str], config_url: str | None
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OLLAMA_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    endpoint = endpoint_for(parse_model_spec(spec), config_base_url=config_url)
    model = ModelResolver(default=spec, base_url=config_url).model()
    assert isinstance(model, OpenAIChatModel)
    assert str(model.client.base_url).rstrip("/") == endpoint.base_url
    assert model.client.api_key == (endpoint.key or "not-needed")
    if spec.startswith("ollama"):  # a server that takes no key is never sent the OpenAI one
        assert model.client.api_key == "not-needed"


def test_a_blank_openai_key_is_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "  ")
    with pytest.raises(ConfigError, match="set OPENAI_API_KEY"):
        ModelResolver(default="openai:gpt-4o").model()


def test_a_scripted_scenario_under_home_is_found_by_runs_as_by_doctor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "s.yaml").write_text("rules:\n  - text: hi\n", encoding="utf-8")
    spec = parse_model_spec("scripted:~/s.yaml")
    assert spec.scenario_path == tmp_path / "s.yaml"
    resolver = ModelResolver(default="scripted:~/s.yaml")
    try:
        assert isinstance(resolver.model(), OpenAIChatModel)
    finally:
        resolver.close()
