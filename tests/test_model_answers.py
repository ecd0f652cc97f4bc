"""Each stored model call keeps the model's answer (migration 0007), redacted and capped.

End to end through `personae run` / `runs show` on the scripted replay server, and
through the store API on real SQLite files.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from _helpers import dev_project, read_config_scenario
from _ui_support import cli
from personae.store.answers import ANSWER_PIECE_CAP, ANSWER_TOOL_CALL_CAP, ModelAnswer
from personae.store.db import Store
from personae.store.runs import RunStore

SECRET = "sk-proj-Zq81LmT0pXvW3yBcD4eF5gH6"
LONG = "the long synthesis " * 600  # 11 400 characters, over the cap
PERSONA = """---
name: dev
description: Works on the sample project.
tools: [read_file]
---
You are dev.
"""
SCENARIO = read_config_scenario(
    LONG, description="answers test (scripted)", report=f"config.yaml: port 8081 (key {SECRET})"
)


def personae(cwd: Path, *args: str) -> str:
    return cli(*args, cwd=cwd, env={"COLUMNS": "100"})


@pytest.fixture
def project(tmp_path: Path, offline_home: Path) -> Path:
    return dev_project(tmp_path, {"answers": SCENARIO}, persona=PERSONA)


@pytest.mark.process
def test_runs_show_has_every_calls_answer_redacted_and_capped(project: Path) -> None:
    spec = f"scripted:{project.parent / 'answers.yaml'}"
    done = personae(project, "run", "What port?", "--persona", "dev", "--model", spec)
    run_id = done.split("personae runs show ")[1].split()[0]

    shown = json.loads(personae(project, "runs", "show", run_id, "--json"))
    calls = shown["model_calls"]
    assert [c["role"] for c in calls] == ["manager", "worker", "worker", "validator", "manager"]
    plan, tool, report, verdict, synthesis = (c["answer"] for c in calls)
    # Structured output arrives as a tool call with its arguments.
    assert [t["name"] for t in plan["tool_calls"]] == ["final_result"]
    assert json.loads(plan["tool_calls"][0]["args"])["subtasks"][0]["description"] == (
        "Read config"
    )
    assert tool["tool_calls"] == [{"name": "read_file", "args": '{"path": "config.yaml"}'}]
    assert tool["finish_reason"] == "tool_call" and tool["text"] == ""
    assert report["text"] == "config.yaml: port 8081 (key [REDACTED:openai-key])"
    assert report["finish_reason"] == "stop" and not report["cut"]
    assert json.loads(verdict["tool_calls"][0]["args"])["approved"] is True
    # Over the cap: kept up to the cap, then a visible notice of what was left out.
    assert synthesis["cut"] and synthesis["chars"] == len(LONG)
    assert synthesis["text"].startswith(LONG[:ANSWER_PIECE_CAP])
    cut_notice = f"[… answer cut: {len(LONG) - ANSWER_PIECE_CAP} more characters not stored]"
    assert synthesis["text"].endswith(cut_notice)

    text = personae(project, "runs", "show", run_id)
    assert "answer (tool_call, " in text and "answer (stop, " in text
    assert 'tool call: read_file({"path": "config.yaml"})' in text
    assert "text: config.yaml: port 8081 (key [REDACTED:openai-key])" in text
    assert "cut to the cap" in text
    full = personae(project, "runs", "show", run_id, "--full")
    assert cut_notice in full

    # Redacted before it was stored: the stored answers never held the key.
    with sqlite3.connect(project / ".personae" / "state.db") as conn:
        stored = [r[0] for r in conn.execute("SELECT answer_json FROM model_calls")]
    assert len(stored) == 5 and all(stored)
    assert not any(SECRET in s for s in stored)


def test_store_api_answer_round_trip(open_store: Callable[[], Store]) -> None:
    with open_store() as store:  # SQLite and PostgreSQL
        runs = RunStore(store)
        run_id = runs.create(task="t", model="scripted:x", heartbeat=False)
        asked: list[tuple[str, str | dict[str, Any] | None]] = [
            ("write_file", {"path": "a.env", "api_key": "hunter2-hunter2", "n": 1}),
            ("run_shell", f'{{"command": "curl -H \\"Bearer {SECRET}\\""}}'),
            ("odd", "not json at all " + SECRET),
        ]
        asked += [("noop", None)] * ANSWER_TOOL_CALL_CAP
        answer = ModelAnswer.build(text=None, tool_calls=asked, finish_reason="tool_call")
        runs.add_model_call(run_id, role="worker", model="m", context_text="c", budget={},
                            usage={}, answer=answer)  # fmt: skip
        runs.add_model_call(run_id, role="worker", model="m", context_text="c", budget={},
                            usage={})  # fmt: skip
        first, second = runs.model_calls(run_id)
    assert first.answer == answer and second.answer is None
    calls = first.answer.tool_calls
    assert json.loads(calls[0].args) == {
        "path": "a.env",
        "api_key": "[REDACTED:secret-field]",
        "n": 1,
    }
    assert SECRET not in calls[1].args and "[REDACTED:" in calls[1].args
    assert calls[2].args == "not json at all [REDACTED:openai-key]"
    assert len(calls) == ANSWER_TOOL_CALL_CAP + 1 and first.answer.cut
    assert calls[-1].name == "[… answer cut]"
    assert calls[-1].args == "3 more tool call(s) not stored"


def test_migration_0007_upgrades_an_older_store(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with Store(path) as store:
        runs = RunStore(store)
        run_id = runs.create(task="t", model="m", heartbeat=False)
        runs.add_model_call(run_id, role="manager", model="m", context_text="c", budget={},
                            usage={})  # fmt: skip
    # Make it a store from before 0007: no column, migration not recorded.
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE model_calls DROP COLUMN answer_json")
        conn.execute("DELETE FROM schema_migrations WHERE number = 7")
    with Store(path) as store:
        runs = RunStore(store)
        (old,) = runs.model_calls(run_id)
        assert old.answer is None
        new_id = runs.create(task="t2", model="m", heartbeat=False)
        runs.add_model_call(new_id, role="manager", model="m", context_text="c", budget={},
                            usage={}, answer=ModelAnswer.build(text="hi"))  # fmt: skip
        assert runs.model_calls(new_id)[0].answer == ModelAnswer.build(text="hi")
    # The column there but the migration unrecorded (a half-applied upgrade): still opens.
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM schema_migrations WHERE number = 7")
    with Store(path) as store:
        assert RunStore(store).model_calls(new_id)[0].answer == ModelAnswer.build(text="hi")
