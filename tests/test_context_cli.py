"""`personae context build|report|roles` through a real subprocess on the example project."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from _helpers import personae_cli
from personae.store.conversations import ConversationStore, Message
from personae.store.db import Store
from personae.tokens.exact import exact_counter

COUNTER = exact_counter("o200k_base")


def cli(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``personae ARGS`` in ``root``, without the caller's PERSONAE_MODEL unless ``env``
    sets one."""
    return personae_cli(*args, cwd=root, env=env, drop=("PERSONAE_MODEL",))


def analyst_context(
    root: Path, role: str, task: str, *options: str
) -> subprocess.CompletedProcess[str]:
    """``personae context build`` for the ``analyst`` persona in ``role`` on ``task``."""
    return cli(
        root, "context", "build", "--role", role, "--persona", "analyst", "--task", task, *options
    )


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("example")
    done = cli(root, "init", ".")
    assert done.returncode == 0, done.stderr
    return root


def test_build_shows_a_real_assembled_context(example: Path, isolated_home: Path) -> None:
    done = analyst_context(example, "worker", "Which product sold best in March?", "--report")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    # The project's vision reaches the worker too, first (the most stable section).
    assert out.startswith("<vision>\n# Shop sales insights\n")
    assert "</vision>\n\n<active_persona>\n" in out
    assert "<directive>\n# Project directive" in out
    assert "<task>\nWhich product sold best in March?\n</task>" in out
    assert "Context Budget Report (role: worker" in done.stderr
    assert "o200k_base (exact)" in done.stderr


def test_json_report_total_is_the_exact_count(example: Path, isolated_home: Path) -> None:
    done = analyst_context(example, "client", "t", "--budget", "3000", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["report"]["total"] == COUNTER.count(data["rendered"])
    assert data["report"]["budget"] == 3000
    assert data["report"]["history_path"] == "none"
    assert "<validation_context>" in data["rendered"] and "<active_persona>" not in data["rendered"]


def test_model_decides_counter_and_window(example: Path, isolated_home: Path) -> None:
    done = cli(
        example, "context", "report", "--role", "worker", "--json", "--model", "openai:gpt-4o"
    )
    rep = json.loads(done.stdout)
    assert rep["counter"] == "o200k_base" and rep["counter_exact"] is True
    assert rep["window"] and rep["budget"] == int(rep["window"] * 0.3)
    done = cli(
        example,
        "context",
        "report",
        "--role",
        "worker",
        "--json",
        env={"PERSONAE_MODEL": "anthropic:claude-sonnet-4-5"},
    )
    rep = json.loads(done.stdout)
    assert rep["counter_exact"] is False and rep["counter"].startswith("estimate")
    done = cli(example, "context", "report", "--role", "worker", "--window", "10000")
    assert "3,000" in done.stdout and "Within budget" in done.stdout


def test_session_from_the_project_store(example: Path, isolated_home: Path) -> None:
    store = Store(example / ".personae" / "state.db")
    conv = ConversationStore(store, COUNTER)
    sid = conv.create_session(session_id="s1")
    conv.append(sid, Message("user", "How many rows are in sales.csv?"))
    conv.append(
        sid,
        Message(
            "assistant", "", tool_calls=[{"id": "c1", "name": "read_file", "args": {"path": "x"}}]
        ),
    )
    conv.append(sid, Message("tool", "date,product,qty\n2026-03-01,tea,4", tool_call_id="c1"))
    store.close()
    done = cli(
        example, "context", "build", "--role", "worker", "--session", "s1", "--task", "count rows"
    )
    assert done.returncode == 0, done.stderr
    assert "### tool result c1\ndate,product,qty" in done.stdout
    bad = cli(example, "context", "build", "--role", "worker", "--session", "nope")
    assert bad.returncode == 2 and "unknown session 'nope'" in bad.stderr  # usage
    assert "Traceback" not in bad.stderr


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["--role", "wroker"], 2, "did you mean 'worker'"),
        (["--role", "worker", "--budget", "10", "--window", "100"], 2, "not both"),
        (["--role", "worker", "--budget", "0"], 2, "--budget"),
        (["--role", "worker", "--persona", "nobody"], 2, "unknown persona 'nobody'"),
        (["--role", "worker", "--task", "word " * 400, "--budget", "50"], 1, "over)"),
    ],
)
def test_bad_usage_is_one_clear_line(
    example: Path, isolated_home: Path, args: list[str], code: int, needle: str
) -> None:
    done = cli(example, "context", "build", *args)
    assert done.returncode == code, done.stderr
    assert needle in done.stderr
    assert "Traceback" not in done.stderr


def test_session_without_a_store_writes_nothing(tmp_path: Path, isolated_home: Path) -> None:
    done = cli(tmp_path, "context", "build", "--role", "worker", "--session", "s1")
    assert done.returncode == 1 and "no conversation store yet" in done.stderr
    assert not (tmp_path / ".personae" / "state.db").exists()


def test_bad_profiles_file_names_file_and_line(tmp_path: Path, isolated_home: Path) -> None:
    (tmp_path / ".personae").mkdir()
    (tmp_path / ".personae" / "profiles.yaml").write_text(
        "sections:\n  directive:\n    cap: -5\n", encoding="utf-8"
    )
    done = cli(tmp_path, "context", "roles")
    assert done.returncode == 2  # a mistake in the configuration: usage, as in `run`
    assert done.stderr.strip().count("\n") == 0
    assert "profiles.yaml:3: sections.directive.cap" in done.stderr


@pytest.mark.parametrize(
    ("command", "own"), [("build", ["--report"]), ("report", [])], ids=["build", "report"]
)
def test_build_and_report_list_the_shared_options_in_order(
    tmp_path: Path, command: str, own: list[str]
) -> None:
    done = cli(tmp_path, "context", command, "--help", env={"COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    shared = ["--role", "--persona", "--task", "--session", "--model", "--budget", "--window"]
    flags = [*shared, "--step", *own, "--json", "--root", "--help"]
    found = [word for word in done.stdout.split() if word in flags]
    assert found == flags


def test_roles_lists_profiles(tmp_path: Path, isolated_home: Path) -> None:
    done = cli(tmp_path, "context", "roles")
    assert done.returncode == 0
    assert any(line.startswith("builder ") for line in done.stdout.splitlines())
