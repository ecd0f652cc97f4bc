"""The receiving side (begin/finish), the ledger, history and the handover CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from _helpers import ProjectFactory, personae_cli
from personae.errors import UsageError
from personae.handover import runflow
from personae.handover._history import history_for
from personae.handover.create import (
    HandoverContent,
    build_handover,
    parse_file_spec,
    write_handover,
)
from personae.handover.files import read_handover
from personae.store.conversations import ConversationStore, Message
from personae.store.db import Store
from personae.store.handovers import HandoverLedger
from personae.tokens.registry import counter_for_model


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return personae_cli(*args, cwd=cwd)


@pytest.fixture
def project(project_factory: ProjectFactory) -> Path:
    return project_factory(
        {"report-writer": "---\nname: report-writer\ndescription: Writes reports.\n---\nWrite.\n"},
        {"data/sales.csv": "month,total\n1,10\n"},
    )


def make(project: Path, **kw: object) -> Path:
    h = build_handover(
        source_persona="data-analyst",
        target_persona="report-writer",
        task="Write a one-page report",
        cwd=project,
        content=HandoverContent(
            files=[parse_file_spec("data/sales.csv:data:monthly sales")],
            insights=["sales up 5%"],
            data={"months": 12},
            **kw,  # type: ignore[arg-type]
        ),
    )
    return write_handover(h, cwd=project).path


def test_begin_reads_task_section_and_workdir(project: Path) -> None:
    path = make(project)
    session = runflow.begin(path, "report-writer", cwd=project, non_interactive=True)
    assert session.task == session.prompt == "Write a one-page report"
    assert session.workdir == project.resolve()
    assert session.warnings == []
    artifacts = read_handover(path, policy=session.policy).artifact_paths
    assert artifacts == [project.resolve() / "data" / "sales.csv"]
    text = session.section_text
    for needle in ["data-analyst", "Write a one-page report", "sales up 5%", "data/sales.csv"]:
        assert needle in text
    interactive = runflow.begin(path, None, cwd=project, non_interactive=False)
    assert interactive.prompt is None and interactive.persona == "report-writer"


def test_begin_warns_on_persona_mismatch(project: Path) -> None:
    session = runflow.begin(make(project), "someone-else", cwd=project, non_interactive=True)
    assert session.persona == "someone-else"
    assert "expects persona 'report-writer'" in session.warnings[0]


def test_begin_moves_to_source_directory_when_allowed(project: Path, tmp_path: Path) -> None:
    path = make(project)
    other = tmp_path / "elsewhere"
    other.mkdir()
    session = runflow.begin(path, None, cwd=other, non_interactive=True)
    assert session.workdir == project.resolve()


def test_finish_writes_results_in_place_on_success(project: Path) -> None:
    path = make(project)
    session = runflow.begin(path, None, cwd=project, non_interactive=True)
    written = runflow.finish(
        session,
        status="success",
        output="report written",
        artifacts=["report.md", "/etc/passwd"],
        next_steps=["share it"],
    )
    assert written == path
    results = read_handover(path).handover.results
    assert results is not None
    assert (results.status, results.output, results.artifacts, results.next_steps) == (
        "success",
        "report written",
        ["report.md"],
        ["share it"],
    )
    assert any("/etc/passwd" in w for w in session.warnings)


def test_finish_writes_failure_and_return_path(project: Path) -> None:
    path = make(project)
    session = runflow.begin(path, None, cwd=project, non_interactive=True)
    ret = project / "out" / "result.yaml"
    written = runflow.finish(session, status="failure", output=None, error="boom", return_path=ret)
    assert written == ret
    back = read_handover(ret)
    assert back.format == "yaml"
    assert back.handover.results is not None and back.handover.results.error == "boom"
    assert read_handover(path).handover.results is None  # original untouched


def test_working_on_writes_every_turn_as_the_results(project: Path) -> None:
    path = make(project)
    session = runflow.begin(path, None, cwd=project, non_interactive=True)
    with runflow.working_on(session) as work:
        work.add(runflow.HandoverTurn(done=True, answer="first", files=["a.md"]))
        work.add(
            runflow.HandoverTurn(
                done=False, answer="second", files=["a.md", "/etc/passwd"], warnings=["check b"]
            )
        )
    assert work.written == path
    results = read_handover(path).handover.results
    assert results is not None and results.status == "partial"  # one turn was not done
    assert results.output == "first\n\nsecond"
    assert (results.artifacts, results.next_steps) == (["a.md"], ["check b"])
    assert any("/etc/passwd" in w for w in work.new_warnings)  # dropped, and said so


def test_working_on_writes_the_failure_and_raises_on(project: Path) -> None:
    path = make(project)
    session = runflow.begin(path, None, cwd=project, non_interactive=True)
    ret = project / "result.json"
    with pytest.raises(TimeoutError), runflow.working_on(session, return_path=ret) as work:
        work.add(runflow.HandoverTurn(done=True, answer="never kept"))
        raise TimeoutError
    assert work.written is None
    results = read_handover(ret).handover.results
    assert results is not None
    assert (results.status, results.error, results.output) == ("failure", "timed out", None)


def test_working_on_without_a_handover_writes_nothing(project: Path) -> None:
    with runflow.working_on(None) as work:
        work.add(runflow.HandoverTurn(done=True, answer="ok"))
    assert work.written is None
    assert not list(project.rglob("*.json"))


def test_finish_cuts_huge_output_instead_of_failing(project: Path) -> None:
    session = runflow.begin(make(project), None, cwd=project, non_interactive=True)
    runflow.finish(session, status="partial", output="x" * 500_000)
    results = read_handover(session.path).handover.results
    assert results is not None and len(results.output or "") <= 200_000
    assert "cut" in (results.output or "")


def test_finish_survives_deleted_file(project: Path) -> None:
    path = make(project)
    session = runflow.begin(path, None, cwd=project, non_interactive=True)
    path.unlink()
    runflow.finish(session, status="success", output="ok")
    assert read_handover(path).handover.results is not None


def test_ledger_records_create_start_result_and_outlives_file(project: Path) -> None:
    path = make(project)
    hid = read_handover(path).handover.handover_id
    session = runflow.begin(path, None, cwd=project, non_interactive=True)
    runflow.finish(session, status="success", output="ok")
    path.unlink()
    ledger = HandoverLedger.open(project / ".personae" / "state.db")
    try:
        entry = ledger.get(hid[:8])
        assert entry is not None
        assert (entry.status, entry.source_persona, entry.target_persona) == (
            "success",
            "data-analyst",
            "report-writer",
        )
        assert entry.finished_at is not None and len(entry.file_hash) == 64
        assert [e.event for e in ledger.events(hid)] == ["created", "started", "result"]
    finally:
        ledger.close()
    out = cli(project, "handover", "ledger", hid)
    assert out.returncode == 0 and "success" in out.stdout and "created" in out.stdout


def test_history_comes_from_conversation_store(project: Path) -> None:
    db = project / ".personae" / "state.db"
    store = Store(db)
    conv = ConversationStore(store, counter_for_model(None))
    a = conv.create_session(persona="data-analyst", title="analyse sales")
    conv.append(a, Message(role="user", content="analyse"))
    conv.append(a, Message(role="assistant", content="sales grew 5% in Q4"))
    b = conv.create_session(persona="reviewer", title="review")
    conv.append(b, Message(role="user", content="review"))
    seq = conv.append(b, Message(role="assistant", content="long answer"))
    conv.save_summary(b, seq, "review found two issues")
    store.close()
    history = history_for(db)
    assert [(h.persona, h.summary) for h in history] == [
        ("data-analyst", "sales grew 5% in Q4"),
        ("reviewer", "review found two issues"),
    ]
    out = cli(project, "handover", "create", "--to", "report-writer", "--task", "write")
    assert out.returncode == 0, out.stderr
    saved = json.loads(Path(out.stdout.strip()).read_text())
    assert [h["persona"] for h in saved["context"]["history"]] == ["data-analyst", "reviewer"]


def test_create_from_a_subfolder_writes_into_the_project(project: Path) -> None:
    (project / ".personae" / "config.yaml").write_text(
        "handover:\n  env_allow: [MY_REGION]\n", encoding="utf-8"
    )
    sub = project / "data"
    out = personae_cli(
        "handover", "create", "--to", "report-writer", "--task", "Write it", "--file",
        "sales.csv:data:monthly sales", cwd=sub, env={"MY_REGION": "eu-west"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    path = Path(out.stdout.strip())
    assert path.parent == (project / ".personae" / "handovers").resolve()
    assert not (sub / ".personae").exists()  # no stray project that hides the real one
    saved = read_handover(path).handover
    assert saved.source.working_directory == str(sub.resolve())  # the child works there
    assert saved.source.environment.get("MY_REGION") == "eu-west"  # the project's config
    ledger = cli(project, "handover", "ledger", "--json")
    assert ledger.returncode == 0 and saved.handover_id in ledger.stdout


def test_every_way_to_create_a_handover_honours_the_env_allow_config(project: Path) -> None:
    (project / ".personae" / "config.yaml").write_text(
        "handover:\n  env_allow: [MY_REGION]\n", encoding="utf-8"
    )
    environ = {"MY_REGION": "eu-west", "OTHER": "x"}
    h = build_handover(
        source_persona="a", target_persona="b", task="t", cwd=project / "data", environ=environ
    )
    assert (
        h.source.environment.get("MY_REGION") == "eu-west" and "OTHER" not in h.source.environment
    )
    given = build_handover(
        source_persona="a", target_persona="b", task="t", cwd=project, environ=environ,
        env_allow=(),
    )  # fmt: skip
    assert "MY_REGION" not in given.source.environment  # an explicit list wins


def test_cli_create_show_validate(project: Path) -> None:
    out = cli(
        project,
        "handover", "create", "--to", "report-writer", "--task", "Write it",
        "--file", "data/sales.csv:data:monthly sales", "--insight", "up 5%",
        "--data", '{"months": 12}', "--out", "h.yaml", "--from", "data-analyst",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    path = Path(out.stdout.strip())
    assert path == project.resolve() / "h.yaml"
    assert read_handover(path).format == "yaml"
    show = cli(project, "handover", "show", "h.yaml")
    assert "report-writer" in show.stdout and "up 5%" in show.stdout
    valid = cli(project, "handover", "validate", "h.yaml")
    assert valid.returncode == 0 and valid.stdout.startswith("ok:")
    js = cli(
        project,
        "handover",
        "create",
        "--to",
        "researcher",
        "--task",
        "t",
        "--context-format",
        "json",
    )
    assert js.returncode == 0 and js.stdout.strip().endswith(".json")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--file", "data/sales.csv:binary"], "unknown type 'binary'"),
        (["--file", "/etc/passwd:data"], "outside the allowed roots"),
        (["--data", "{not json"], "--data is not valid JSON"),
        (["--data", "[1]"], "must be a JSON object"),
        (["--context-format", "xml"], "json or yaml"),
    ],
)
def test_cli_create_refuses_bad_input(project: Path, args: list[str], needle: str) -> None:
    out = cli(project, "handover", "create", "--to", "researcher", "--task", "t", *args)
    # a mistake is usage (exit 2); a file the safety rules refuse is not a mistake (exit 1)
    assert out.returncode == (1 if "allowed roots" in needle else 2)
    assert needle in out.stderr and "Traceback" not in out.stderr
    assert (
        not list((project / ".personae" / "handovers").glob("*.json"))
        if (project / ".personae" / "handovers").exists()
        else True
    )


def test_cli_validate_refuses_unsafe_and_corrupt(project: Path) -> None:
    path = make(project)
    data = json.loads(path.read_text())
    data["source"]["environment"] = {"LD_PRELOAD": "/evil.so"}
    bad = project / "bad.json"
    bad.write_text(json.dumps(data))
    out = cli(project, "handover", "validate", "bad.json")
    assert out.returncode == 1 and "LD_PRELOAD" in out.stderr and "Traceback" not in out.stderr
    bad.write_text(path.read_text()[:100])
    out = cli(project, "handover", "validate", "bad.json")
    assert out.returncode == 1 and "malformed JSON" in out.stderr
    out = cli(project, "handover", "show", "missing.json")
    assert out.returncode == 1 and "no such handover file" in out.stderr


def test_begin_on_bad_file_raises_usage_error(project: Path) -> None:
    bad = project / "x.json"
    bad.write_text("{")
    with pytest.raises(UsageError, match=r"x\.json"):
        runflow.begin(bad, None, cwd=project, non_interactive=True)


def test_cli_create_uses_the_cast_for_mcp_servers_and_target_check(project: Path) -> None:
    personas = project / ".personae" / "personas"
    personas.mkdir(parents=True, exist_ok=True)
    (personas / "data-analyst.md").write_text(
        "---\nname: data-analyst\ndescription: Analyses data.\n"
        "mcpServers:\n  hdf5: {command: hdf5-mcp}\n  slurm: {command: slurm-mcp}\n---\nAnalyse.\n"
    )
    (personas / "report-writer.md").write_text(
        "---\nname: report-writer\ndescription: Writes reports.\n---\nWrite.\n"
    )
    refused = cli(
        project, "handover", "create", "--from", "data-analyst", "--to", "report-writr",
        "--task", "t",
    )  # fmt: skip
    assert refused.returncode == 2 and refused.stdout == ""  # usage
    assert "--to" in refused.stderr and "did you mean 'report-writer'" in refused.stderr
    assert not list(project.glob(".personae/handovers/*.json"))
    out = cli(
        project, "handover", "create", "--from", "data-analyst", "--to", "report-writr",
        "--task", "t", "--no-target-check",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "did you mean 'report-writer'" in out.stderr
    saved = json.loads(Path(out.stdout.strip()).read_text())
    assert saved["context"]["mcpServers"] == ["hdf5", "slurm"]
