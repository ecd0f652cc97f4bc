"""One status and one result, five surfaces: a run's status is the same ``RunStatus`` in
``personae run --json`` (its ``final`` event and exit code), the Python API's
``TeamResult``, the store, the viewer and the OpenTelemetry export (stored runs, and an
instrumented team's live spans), and its whole result is one ``RunResult``, equal field
by field on each, for a run that answered (done) and one that validated nothing
(partial). Scripted model server, real SQLite store."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.models import override_allow_model_requests

from _helpers import dev_project, personae_cli, read_config_scenario
from personae import Limits, RunResult, Team, TeamResult
from personae.context.report import BudgetReport, SubagentBrief
from personae.store.db import Store
from personae.store.runs import RunStore
from personae.store.status import RunStatus
from personae.team.events import RunFinished, event_from_json
from personae.team.result import stored_result
from personae.team.signals import SubtaskStatus
from personae.ui._html import RUN_TONES
from personae.ui.data import Reader
from personae.ui.pages import result_section, run_body

REFUSING = {
    "description": "a worker that only ever calls run_shell, which dev may not use (scripted)",
    "steps": [{"when": {"role": "manager"},
               "output": {"subtasks": [{"description": "Read config"}]}}],
    "rules": [
        {"when": {"role": "worker"},
         "tool_calls": [{"name": "run_shell", "args": {"command": "true"}}]},
        {"when": {"role": "manager"}, "text": "SYNTHESIS"},
    ],
}  # fmt: skip
"""Nothing validated: the run ends ``partial``."""

CASES = [("answers", RunStatus.DONE), ("refuses", RunStatus.PARTIAL)]


@pytest.fixture(autouse=True)
def scripted_requests() -> Iterator[None]:
    """The conftest forbids model requests; these go to the scripted server only."""
    with override_allow_model_requests(True):
        yield


@pytest.fixture
def project(tmp_path: Path, offline_home: Path) -> Path:
    answers = read_config_scenario("Port 8081.", description="answers (scripted)")
    return dev_project(tmp_path, {"answers": answers, "refuses": REFUSING})


def _stored(root: Path, run_id: str) -> RunStatus:
    with Store(root / ".personae" / "state.db") as store:
        return RunStore(store).get(run_id).status


def _viewer(root: Path, run_id: str) -> str:
    """The status the viewer's run page shows: in its facts and on its answer (the same)."""
    reader = Reader(root)
    try:
        body = run_body(reader.run(run_id))
    finally:
        reader.close()
    badge = r'<span class="badge ([a-z]+)">([a-z]+)</span>'
    facts = re.search(f"<dt>status</dt><dd>{badge}</dd>", body)
    answer = re.search(f'data-kind="final"><b>Answer</b> {badge}', body)
    assert facts is not None and answer is not None, body
    assert facts.groups() == answer.groups()
    tone, word = facts.groups()
    assert tone == RUN_TONES[RunStatus(word)]
    return word


def _exported(root: Path, run_id: str) -> str:
    """The ``personae.run.status`` of the run's root span in the OpenTelemetry export."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from personae.telemetry.otel import export_run

    exporter = InMemorySpanExporter()
    export_run(root / ".personae" / "state.db", run_id, exporter=exporter)
    (top,) = [s for s in exporter.get_finished_spans() if s.parent is None]
    return str(top.attributes["personae.run.status"])


@pytest.mark.parametrize(("scenario", "status"), CASES)
def test_the_cli_json_the_store_the_viewer_and_otel_agree(
    project: Path, scenario: str, status: RunStatus
) -> None:
    spec = f"scripted:{project.parent / scenario}.yaml"
    done = personae_cli(
        "run", "What port?", "--persona", "dev", "--model", spec, "--json",
        "--max-retries", "1", cwd=project,
    )  # fmt: skip
    events: list[dict[str, Any]] = [json.loads(line) for line in done.stdout.splitlines()]
    final = events[-1]
    assert final["kind"] == "final", done.stderr
    run_id = final["run_id"]
    assert final["data"]["status"] == status.value
    assert done.returncode == status.exit_code
    assert _stored(project, run_id) is status
    assert _viewer(project, run_id) == status.value
    assert _exported(project, run_id) == status.value


@pytest.mark.parametrize(("scenario", "status"), CASES)
def test_the_python_api_the_store_the_viewer_and_otel_agree(
    project: Path, scenario: str, status: RunStatus
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    live = InMemorySpanExporter()  # the spans an instrumented team opens as the run goes
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(live))
    team = Team.from_project(
        project,
        model=f"scripted:{project.parent / scenario}.yaml",
        limits=Limits(max_retries=1),
        instrument=provider,
    )
    result = team.run("What port?", persona="dev")
    assert result.status is status
    (top,) = [s for s in live.get_finished_spans() if s.parent is None]
    assert top.attributes is not None and top.attributes["personae.run.status"] == status.value
    final = result.events[-1]
    assert final.kind.value == "final" and final.to_json_dict()["data"]["status"] == status.value
    assert _stored(project, result.run_id) is status
    assert _viewer(project, result.run_id) == status.value
    assert _exported(project, result.run_id) == status.value


def test_every_run_status_has_a_tone_in_the_viewer() -> None:
    assert set(RUN_TONES) == set(RunStatus)


def test_the_budget_report_stays_a_model_from_the_turn_to_the_store(project: Path) -> None:
    """Each team call's stored budget is a whole ``BudgetReport`` (the team passes the
    model, never a dict it reads back); nothing in the team reads it as a dict."""
    team = Team.from_project(project, model=f"scripted:{project.parent / 'answers'}.yaml")
    result = team.run("What port?", persona="dev")
    with Store(project / ".personae" / "state.db") as store:
        calls = RunStore(store).model_calls(result.run_id)
    roles = {c.role for c in calls}
    assert {"manager", "worker", "validator"} <= roles
    for call in calls:
        report = BudgetReport.model_validate(call.budget)
        assert report.role == call.role and report.sections
    team_code = Path(__file__).resolve().parents[1] / "src" / "personae" / "team"
    as_dicts = [
        f"{path.name}:{n}"
        for path in sorted(team_code.glob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if '.get("sections")' in line or '["sections"]' in line
    ]
    assert as_dicts == []


def _result_via_viewer(root: Path, run_id: str) -> tuple[RunResult[str] | None, str]:
    """The result the viewer holds for the run, and the result section its page shows."""
    reader = Reader(root)
    try:
        view = reader.run(run_id)
    finally:
        reader.close()
    return view.result, result_section(view)


def _root_span_attributes(root: Path, run_id: str) -> dict[str, Any]:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from personae.telemetry.otel import export_run

    exporter = InMemorySpanExporter()
    export_run(root / ".personae" / "state.db", run_id, exporter=exporter)
    (top,) = [s for s in exporter.get_finished_spans() if s.parent is None]
    return dict(top.attributes or {})


def _same_result_everywhere(root: Path, result: RunResult[str]) -> None:
    """The store, the viewer and the OpenTelemetry export give ``result`` field by field."""
    with Store(root / ".personae" / "state.db") as store:
        stored = stored_result(RunStore(store), result.run_id)
    assert stored is not None
    for a, b in zip(stored.events, result.events, strict=True):
        assert a == b
    assert stored == result  # every field: status, answer, subtasks, usage, events ...
    viewed, section = _result_via_viewer(root, result.run_id)
    assert viewed == result
    shown = re.findall(r'<tr data-subtask="(\d+)"><td>\d+</td><td><span class="badge [a-z]+">'
                       r"([a-z]+)</span></td><td>(\d+)</td>", section)  # fmt: skip
    assert shown == [(str(t.number), t.status.value, str(t.attempts)) for t in result.subtasks]
    shown_json = json.loads(personae_cli("runs", "show", result.run_id, "--json", cwd=root).stdout)
    assert shown_json["result"] == result.to_json_dict() and shown_json["result_unreadable"] is None
    assert shown_json["result"]["subtasks"] == json.loads(
        json.dumps(result.events[-1].to_json_dict()["data"]["subtasks"])
    )
    for call in shown_json["model_calls"]:  # each budget is its model's dump, never the column
        model = SubagentBrief if call["role"] == "subagent" else BudgetReport
        assert model.model_validate(call["budget"]).model_dump(mode="json") == call["budget"]
    attrs = _root_span_attributes(root, result.run_id)
    assert attrs["personae.run.status"] == result.status.value
    assert attrs["personae.run.subtasks"] == len(result.subtasks)
    validated = [t for t in result.subtasks if t.status is SubtaskStatus.VALIDATED]
    assert attrs["personae.run.subtasks.validated"] == len(validated)
    assert attrs["personae.run.failure_count"] == result.failure_count
    assert attrs["personae.run.warnings"] == len(result.warnings)
    assert tuple(attrs["personae.run.files_written"]) == tuple(result.files_written)
    assert attrs["gen_ai.usage.input_tokens"] == result.usage.input_tokens


@pytest.mark.parametrize(("scenario", "status"), CASES)
def test_one_result_from_the_python_api_the_store_the_viewer_and_otel(
    project: Path, scenario: str, status: RunStatus
) -> None:
    """The Python API's result is the stored run's result, the viewer's and the export's:
    one ``RunResult``, equal field by field (events included)."""
    team = Team.from_project(
        project, model=f"scripted:{project.parent / scenario}.yaml", limits=Limits(max_retries=1)
    )
    result = team.run("What port?", persona="dev")
    assert isinstance(result, RunResult) and TeamResult is RunResult
    assert result.status is status and result.subtasks and result.error is None
    assert (result.status is RunStatus.DONE) == all(
        t.status is SubtaskStatus.VALIDATED and t.signal is not None for t in result.subtasks
    )
    assert result.output == result.answer and result.usage.requests > 0
    _same_result_everywhere(project, result)


@pytest.mark.parametrize(("scenario", "status"), CASES)
def test_one_result_from_the_cli_json_the_store_the_viewer_and_otel(
    project: Path, scenario: str, status: RunStatus
) -> None:
    """``personae run --json``'s lines read back into the same ``RunResult`` the store
    holds: its events are the stored events, its ``final`` line the stored result's."""
    done = personae_cli(
        "run", "What port?", "--persona", "dev", "--model",
        f"scripted:{project.parent / scenario}.yaml", "--json", "--max-retries", "1",
        cwd=project,
    )  # fmt: skip
    events = [event_from_json(json.loads(line)) for line in done.stdout.splitlines()]
    final = events[-1]
    assert isinstance(final, RunFinished), done.stderr
    with Store(project / ".personae" / "state.db") as store:
        stored = stored_result(RunStore(store), final.run_id)
    assert stored is not None and stored.status is status
    from_cli = RunResult.of(final, session_id=stored.session_id, model=stored.model, events=events)
    assert from_cli == stored
    assert final.to_json_dict()["data"]["subtasks"] == [
        {"number": t.number, "description": t.description, "status": t.status.value,
         "result": t.result, "reason": t.reason, "attempts": t.attempts,
         "signal": t.signal.model_dump(mode="json") if t.signal else None}
        for t in stored.subtasks
    ]  # fmt: skip
    _same_result_everywhere(project, stored)
