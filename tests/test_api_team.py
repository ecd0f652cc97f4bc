"""``personae.Team`` through the public API only, against the scripted replay server.

Every model call crosses real loopback HTTP through pydantic-ai's provider code
(OpenAI chat for ``scripted:``, Anthropic Messages for ``anthropic:`` pointed at
the scripted server); runs are stored in the project's real SQLite store.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic_ai.models import override_allow_model_requests

import personae
from _helpers import DEV_PERSONA, dev_project, read_config_scenario, run_async
from personae import AnswerDelta, CancelToken, Event, EventKind, Limits, RunEnd, Team
from personae.store.db import Store
from personae.store.runs import RunStore
from personae.team.events import RunFinished, RunStarted
from personae.team.result import stored_result

ANSWER = "The service listens on port 8081, as config.yaml says."


def scenario(answer: str = ANSWER) -> dict[str, Any]:
    return read_config_scenario(answer, description="API test (scripted)")


@pytest.fixture(autouse=True)
def scripted_requests() -> Any:
    """The conftest forbids model requests; these go to the scripted server only."""
    with override_allow_model_requests(True):
        yield


@pytest.fixture
def project(tmp_path: Path, offline_home: Path) -> Path:
    return dev_project(tmp_path, {"one": scenario()})


def spec(project: Path) -> str:
    return f"scripted:{project.parent / 'one.yaml'}"


def stored(project: Path, run_id: str) -> tuple[str, int]:
    with sqlite3.connect(project / ".personae" / "state.db") as db:
        (status,) = db.execute("SELECT status FROM runs WHERE id=?", (run_id,)).fetchone()
        events, = db.execute("SELECT count(*) FROM run_events WHERE run_id=?",
                             (run_id,)).fetchone()  # fmt: skip
    return str(status), int(events)


def test_run_returns_a_typed_result_and_stores_the_run(project: Path) -> None:
    team = Team.from_project(project, model=spec(project))
    result = team.run("What port does the service use?", persona="dev")
    assert result.status == "done"
    assert result.answer == ANSWER
    assert result.model.startswith("scripted")
    [sub] = result.subtasks
    assert (sub.number, sub.description, sub.status) == (1, "Read config", "validated")
    assert sub.signal is not None and sub.signal.confidence == "high" and sub.signal.progress_made
    assert result.usage.requests == 5 and result.usage.input_tokens > 0
    assert result.events[0].kind is EventKind.START and result.events[-1].kind is EventKind.FINAL
    assert stored(project, result.run_id) == ("done", len(result.events))
    # The session continues: the next turn's worker sees the first turn.
    (project.parent / "one.yaml").write_text(yaml.safe_dump(scenario("SECOND")))
    again = team.run("And again?", persona="dev", session=result.session_id)
    assert again.session_id == result.session_id and again.answer == "SECOND"


def test_run_stream_yields_ordered_events_deltas_then_the_result(project: Path) -> None:
    team = Team.from_project(project, model=spec(project), persona="dev")

    async def collect() -> list[Any]:
        return [item async for item in team.run_stream("What port?")]

    items = run_async(collect())
    events = [i for i in items if isinstance(i, Event)]
    deltas = [i for i in items if isinstance(i, AnswerDelta)]
    assert isinstance(items[-1], RunEnd)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    kinds = [e.kind for e in events]
    assert kinds[0] is EventKind.START and kinds[-1] is EventKind.FINAL
    assert kinds.index(EventKind.PLAN) < kinds.index(EventKind.VALIDATION)
    # Text deltas of the final answer: several, in order, joined = the answer, all before FINAL.
    assert len(deltas) > 3 and [d.index for d in deltas] == list(range(len(deltas)))
    assert "".join(d.text for d in deltas) == ANSWER
    assert items.index(deltas[-1]) < items.index(events[-1])
    assert all(d.run_id == events[0].run_id for d in deltas)
    result = items[-1].result
    assert result.answer == ANSWER and result.events == events


def test_anthropic_provider_runs_a_whole_team_and_streams_the_answer(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from personae.models.scripted import ScriptedServer

    with ScriptedServer(project.parent / "one.yaml") as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.root_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "scripted-no-key")
        team = Team.from_project(project, model="anthropic:claude-haiku-4-5", persona="dev")

        async def collect() -> list[Any]:
            return [item async for item in team.run_stream("What port?")]

        items = run_async(collect())
        routes = [route for route, _ in server.raw_requests]
        # every Messages request carries the run's output cap (a quarter of the 200k window,
        # at most 4,096 tokens); the final answer's request streams
        assert all(body.get("max_tokens") == 4096 for _, body in server.raw_requests)
        assert server.raw_requests[-1][1].get("stream")
    with ScriptedServer(project.parent / "one.yaml") as server:  # the blocking run too
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.root_url)
        plain = team.run("What port?")
        assert [route for route, _ in server.raw_requests] == ["/v1/messages"] * 5
    assert plain.status == "done" and plain.answer == ANSWER and plain.usage.requests == 5
    result = items[-1].result
    assert result.status == "done" and result.answer == ANSWER
    assert result.model == "anthropic:claude-haiku-4-5"
    assert routes and set(routes) == {"/v1/messages"}, routes
    deltas = [i.text for i in items if isinstance(i, AnswerDelta)]
    assert len(deltas) > 3 and "".join(deltas) == ANSWER


def test_breaking_out_of_the_stream_cancels_the_run(project: Path) -> None:
    team = Team.from_project(project, model=spec(project), persona="dev")

    async def first_plan() -> str:
        async for item in team.run_stream("What port?"):
            if isinstance(item, Event) and item.kind is EventKind.PLAN:
                return item.run_id
        raise AssertionError("no plan event")

    run_id = run_async(first_plan())
    assert stored(project, run_id)[0] == "cancelled"


def test_cancel_token_ends_the_run_as_cancelled(project: Path) -> None:
    team = Team.from_project(project, model=spec(project), persona="dev")
    token = CancelToken()

    async def go() -> personae.TeamResult:
        seen: list[personae.TeamResult] = []
        async for item in team.run_stream("What port?", cancel=token):
            if isinstance(item, Event) and item.kind is EventKind.SUBTASK_START:
                token.cancel()
            if isinstance(item, RunEnd):
                seen.append(item.result)
        return seen[0]

    result = run_async(go())
    assert result.status == "cancelled" and result.answer == ""
    final = result.events[-1]  # a cancelled run ends with a final event too
    assert isinstance(final, RunFinished) and final.status == "cancelled"
    assert final.error == "cancelled from the Python API"  # the token, not a guess
    assert stored(project, result.run_id)[0] == "cancelled"


def test_request_cap_is_an_argument(project: Path) -> None:
    team = Team.from_project(project, model=spec(project), persona="dev")
    result = team.run("What port?", limits=Limits(max_requests=2))
    assert result.usage.requests == 2
    assert result.status == "partial"
    assert any("request cap of 2" in w for w in result.warnings)


def test_run_inside_an_event_loop_says_to_use_arun(project: Path) -> None:
    team = Team.from_project(project, model=spec(project))

    async def inside() -> None:
        team.run("x")

    with pytest.raises(personae.UsageError, match="arun"):
        run_async(inside())


def test_an_unknown_keyword_is_refused_before_anything_runs(project: Path) -> None:
    team = Team.from_project(project, model=spec(project))
    with pytest.raises(TypeError, match="sesion"):
        team.run("x", sesion="s-1")  # type: ignore[call-arg]


def test_not_a_folder_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(personae.UsageError, match="not a project folder"):
        Team.from_project(tmp_path / "missing")


def test_timeout_limit_cancels_the_run(project: Path) -> None:
    team = Team.from_project(project, model=spec(project), persona="dev")
    result = team.run("What port?", limits=Limits(timeout=0.05))
    assert result.status == "cancelled" and result.run_id
    assert stored(project, result.run_id)[0] == "cancelled"
    final = result.events[-1]
    assert isinstance(final, RunFinished) and final.error == "timed out (limits.timeout 0.05 s)"
    # the cancelled run's result is the stored one (no result made up beside the store)
    assert (result.answer, result.output, result.error) == ("", None, final.error)
    with Store(project / ".personae" / "state.db") as store:
        assert stored_result(RunStore(store), result.run_id) == result


def test_cancelling_the_awaiting_task_cancels_the_run(project: Path) -> None:
    team = Team.from_project(project, model=spec(project), persona="dev")
    seen: list[Event] = []

    async def go() -> None:
        task = asyncio.create_task(team.arun("What port?"))
        while not seen:  # wait until the run is stored and going
            await asyncio.sleep(0.01)
            seen.extend(_started(project))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run_async(go())
    assert stored(project, seen[0].run_id)[0] == "cancelled"


def _started(project: Path) -> list[Event]:
    db = project / ".personae" / "state.db"
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT id FROM runs WHERE status='running'").fetchall()
    return [
        RunStarted(run_id=r[0], seq=1, at="", task=None, persona=None, session=None,
                   context_from=None, pid=0, sandbox=None)
        for r in rows
    ]  # fmt: skip


@pytest.mark.process
def test_run_stream_yields_the_events_personae_run_json_prints(project: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    cli = subprocess.run(
        [sys.executable, "-m", "personae", "run", "What port?", "--persona", "dev",
         "--model", spec(project), "--json"],
        cwd=project, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "COLUMNS": "100"},
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    printed = [json.loads(line) for line in cli.stdout.splitlines() if line.startswith("{")]
    team = Team.from_project(project, model=spec(project), persona="dev")

    async def collect() -> list[Event]:
        return [i async for i in team.run_stream("What port?") if isinstance(i, Event)]

    streamed = [e.to_json_dict() for e in run_async(collect())]
    # The answer's text pieces: JSON lines in the CLI, typed AnswerDelta items in the stream.
    shape = [(e["seq"], e["kind"], e["subtask"]) for e in printed if e["kind"] != "answer_delta"]
    assert shape == [(e["seq"], e["kind"], e["subtask"]) for e in streamed]
    assert printed[-1]["message"] == streamed[-1]["message"] == ANSWER


def test_an_explicit_cast_is_used_and_left_unchanged(project: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / ".personae" / "personas").mkdir(parents=True)
    (elsewhere / ".personae" / "personas" / "ops.md").write_text(
        DEV_PERSONA.replace("name: dev", "name: ops").replace("You are dev.", "You are ops.")
    )
    cast = personae.Cast.load(elsewhere)
    assert sorted(cast.personas) == ["ops"]
    team = Team(root=project, model=spec(project), cast=cast)
    result = team.run("What port?", persona="ops")
    assert result.status == "done"
    starts = [e for e in result.events if e.kind is EventKind.SUBTASK_START]
    assert [e.data["persona"] for e in starts] == ["ops"]
    assert sorted(cast.personas) == ["ops"]  # the run added bundled personas to its copy only
    with pytest.raises(personae.PersonaeError, match="dev"):
        team.run("What port?", persona="dev")  # the project's own persona is not in this cast
