"""Every default limit comes from personae.limits.DEFAULTS; every layout path from Layout."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from personae.api.handover import MAX_CONCURRENCY, ChainOptions, HandoverRunOptions
from personae.context.budget import DEFAULT_SHARE
from personae.context.sources import read_directive, resolve_task
from personae.errors import ConfigError, UsageError
from personae.handover.child import HANDOVER_DEPTH_CAP, ChildOptions, backoff_delays
from personae.layout import SESSION_ID, Layout
from personae.limits import DEFAULTS, Defaults
from personae.project import Project
from personae.settings import PersonaeSettings, chosen_model
from personae.team.dispatch import SubtaskBudget
from personae.team.loop import TeamConfig
from personae.team.session import RunOptions
from personae.team.subagents import DEFAULT_DEPTH_CAP
from personae.workflow.spec import StepDefaults


def test_settings_team_and_handover_share_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PERSONAE_MAX_RETRIES", "PERSONAE_BUDGET_SHARE", "PERSONAE_HANDOVER_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    settings = PersonaeSettings()
    options = RunOptions(root=Path("."))
    assert settings.max_retries == options.max_retries == TeamConfig().max_retries
    assert SubtaskBudget().max_retries == DEFAULTS.max_retries
    assert settings.budget_share == options.budget_share == DEFAULT_SHARE == DEFAULTS.budget_share
    child = ChildOptions()
    assert settings.handover_timeout == options.handover_timeout == child.timeout
    assert child.timeout == StepDefaults().timeout == DEFAULTS.handover_timeout
    assert child.attempts == StepDefaults().retries + 1 == HandoverRunOptions().retries + 1
    assert child.backoff == StepDefaults().backoff == DEFAULTS.handover_backoff
    assert backoff_delays(3) == [DEFAULTS.handover_backoff, DEFAULTS.handover_backoff * 2]
    assert DEFAULTS.handover_depth_cap == HANDOVER_DEPTH_CAP
    assert DEFAULTS.subagent_depth_cap == DEFAULT_DEPTH_CAP


def test_defaults_are_frozen_and_an_env_variable_still_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULTS.max_retries = 5  # type: ignore[misc]
    assert Defaults(handover_retries=4).handover_attempts == 5
    monkeypatch.setenv("PERSONAE_MAX_RETRIES", "7")
    assert PersonaeSettings().max_retries == 7
    monkeypatch.setenv("PERSONAE_MAX_RETRIES", "-1")
    with pytest.raises(ConfigError, match="PERSONAE_MAX_RETRIES"):
        PersonaeSettings()


def test_project_paths_come_from_its_layout(tmp_path: Path) -> None:
    project = Project.open(tmp_path)
    layout = Layout(project.root)
    assert project.layout == layout
    assert project.dir == layout.dir == project.root / ".personae"
    assert project.state_db == layout.state_db == layout.dir / "state.db"
    assert layout.handovers.parent == layout.memory.parent == layout.chains.parent == layout.dir


@pytest.mark.parametrize(
    ("value", "ok"),
    [("abc-123", True), ("user@host:1/x.y", True), ("abc\n", False), ("", False),
     ("a b", False), ("x" * 201, False)],
)  # fmt: skip
def test_one_session_id_pattern(value: str, ok: bool) -> None:
    assert (SESSION_ID.fullmatch(value) is not None) is ok


def test_the_config_and_profiles_files_read_are_the_first_present(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    assert layout.config_file is None and layout.profiles_file is None
    layout.dir.mkdir()
    (layout.dir / "config.yaml").mkdir()  # a folder named like the file is passed over
    (layout.dir / "config.yml").write_text("model: openai:gpt-4o\n", encoding="utf-8")
    (layout.dir / "config").write_text("model: ollama:llama3\n", encoding="utf-8")
    assert layout.config_file == layout.dir / "config.yml"
    assert Project.open(tmp_path).config.model == "openai:gpt-4o"
    (layout.dir / "profiles.yml").symlink_to(tmp_path / "missing.yaml")  # dangling: still it
    assert layout.profiles_file == layout.dir / "profiles.yml"
    (layout.dir / "profiles.yaml").write_text("roles: {}\n", encoding="utf-8")
    assert layout.profiles_file == layout.dir / "profiles.yaml"


def test_project_documents_and_directive_are_read_where_layout_places_them(
    tmp_path: Path,
) -> None:
    layout = Layout(tmp_path)
    (layout.docs / "tasks").mkdir(parents=True)
    (layout.docs / "tasks" / "fix-login.md").write_text("Fix the login form.\n", encoding="utf-8")
    layout.directive.write_text("Be brief.\n", encoding="utf-8")
    (tmp_path / "AGENTS.md").write_text("Agents file.\n", encoding="utf-8")
    assert read_directive(tmp_path) == ("Be brief.", layout.directive)
    assert resolve_task(tmp_path, "fix-login") == (
        "Fix the login form.",
        str(layout.docs / "tasks" / "fix-login.md"),
    )


def test_the_default_model_is_chosen_one_way(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERSONAE_MODEL", "ollama:llama3")
    settings = PersonaeSettings()
    assert chosen_model("openai:gpt-4o", settings, "anthropic:x") == ("openai:gpt-4o", "--model")
    assert chosen_model(None, settings, "anthropic:x") == ("ollama:llama3", "PERSONAE_MODEL")
    monkeypatch.delenv("PERSONAE_MODEL")
    settings = PersonaeSettings()
    assert chosen_model(None, settings, "anthropic:x") == ("anthropic:x", "config")
    assert chosen_model(None, settings, None) == (None, "none")


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"timeout": 0}, "timeout"),
        ({"timeout": -5.0}, "timeout"),
        ({"timeout": float("inf")}, "timeout"),
        ({"retries": -1}, "retries"),
        ({"backoff": -0.5}, "backoff"),
    ],
)
def test_handover_run_options_refuse_what_the_cli_refuses(
    options: dict[str, float], field: str
) -> None:
    with pytest.raises(UsageError) as refused:
        HandoverRunOptions(**options)  # type: ignore[arg-type]
    assert refused.value.field == field


@pytest.mark.parametrize("concurrency", [0, -1, MAX_CONCURRENCY + 1])
def test_chain_options_refuse_what_the_cli_refuses(concurrency: int) -> None:
    with pytest.raises(UsageError) as refused:
        ChainOptions(concurrency=concurrency)
    assert refused.value.field == "concurrency"
    assert ChainOptions(concurrency=MAX_CONCURRENCY).concurrency == MAX_CONCURRENCY
