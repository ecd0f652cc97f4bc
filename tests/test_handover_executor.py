"""Child runs in real subprocesses: process-group kill, retries with backoff, results on failure."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from _handover_childprog import CHILD, calls, command
from _helpers import ProjectFactory, free_port, run_async
from personae.handover.child import (
    EXIT_FAILURE,
    EXIT_SUCCESS,
    EXIT_TIMEOUT,
    ChildOptions,
    ChildSpec,
    backoff_delays,
    execute_handover,
    kill_group,
    personae_run_command,
    run_child,
)
from personae.handover.create import HandoverContent, build_handover, write_handover
from personae.handover.files import read_handover
from personae.handover.tool import HandoverToolResult, handover_to_persona
from personae.store.handovers import HandoverLedger


@pytest.fixture
def project(project_factory: ProjectFactory) -> Path:
    return project_factory(
        {name: f"---\nname: {name}\ndescription: Writes.\n---\nWrite.\n"
         for name in ("report-writer", "writer")}
    )  # fmt: skip


def make(project: Path, behave: dict[str, Any] | None = None) -> Path:
    h = build_handover(
        source_persona="data-analyst",
        target_persona="report-writer",
        task="Write the report",
        cwd=project,
        content=HandoverContent(data={"behave": behave or {}}),
    )
    return write_handover(h, cwd=project).path


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_success_results_written_by_child(project: Path) -> None:
    path = make(project)
    out = execute_handover(path, cwd=project, options=ChildOptions(timeout=30, command=command))
    assert out.status == "success" and out.exit_code == EXIT_SUCCESS
    assert len(out.attempts) == 1
    results = read_handover(path).handover.results
    assert results is not None
    assert results.output == "report-writer did: Write the report | history: "
    assert results.artifacts == ["out-report-writer.txt"]


def test_child_without_results_gets_them_from_exit_code(project: Path) -> None:
    path = make(project, {"no_results": True})
    out = execute_handover(path, cwd=project, options=ChildOptions(timeout=30, command=command))
    assert out.status == "success"
    results = read_handover(path).handover.results
    assert results is not None and "plain output from report-writer" in (results.output or "")


def test_timeout_kills_whole_process_group(project: Path) -> None:
    path = make(project, {"grandchild": True, "sleep": 60})
    started = time.monotonic()
    out = execute_handover(
        path, cwd=project, options=ChildOptions(timeout=8, attempts=1, command=command)
    )
    assert time.monotonic() - started < 30
    assert out.exit_code == EXIT_TIMEOUT and out.attempts[0].timed_out
    hid = read_handover(path).handover.handover_id
    grandchild = int((project / f"grandchild-{hid}.pid").read_text())
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild), "grandchild survived the group kill"
    results = read_handover(path).handover.results
    assert results is not None and results.status == "failure"
    assert "timed out" in (results.error or "")


def test_run_child_kills_group_of_a_shell_pipeline(project: Path) -> None:
    pidfile = project / "sleeper.pid"
    script = f"sleep 30 & echo $! > {pidfile}; wait"
    out = run_child(["/bin/sh", "-c", script], cwd=project, timeout=1.0)
    assert out.timed_out and out.exit_code is not None and out.exit_code < 0
    sleeper = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while alive(sleeper) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(sleeper)


def test_kill_group_ends_when_the_reaped_group_is_gone() -> None:
    """A leader that dies at SIGTERM is reaped and the wait ends, not at the grace's end;
    without ``reap`` its zombie keeps the group alive for the whole grace."""
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    started = time.monotonic()
    kill_group(proc.pid, grace=60, reap=proc.poll)
    assert proc.returncode == -15  # SIGTERM ended it: SIGKILL was never needed
    assert time.monotonic() - started < 30, "kill_group waited out its grace"


def test_retries_with_exponential_backoff_then_success(project: Path) -> None:
    path = make(project, {"fail_times": 2})
    spawned: list[float] = []
    ended: list[float] = []
    out = execute_handover(
        path, cwd=project,
        options=ChildOptions(timeout=30, attempts=3, backoff=0.3, command=command),
        on_start=lambda _pid: spawned.append(time.monotonic()),
        on_attempt=lambda _a: ended.append(time.monotonic()),
    )  # fmt: skip
    assert out.status == "success" and len(out.attempts) == 3
    assert len(calls(project)) == 3  # the child really ran three times
    waits = [spawned[i + 1] - ended[i] for i in range(2)]
    # Delay before retry n is 0.3 * 2**n: 0.3 s, then 0.6 s (bounded above too).
    assert 0.3 <= waits[0] < 0.3 + 1.0
    assert 0.6 <= waits[1] < 0.6 + 1.0


def test_final_failure_saves_error_state(project: Path) -> None:
    path = make(project, {"fail_times": 10})
    out = execute_handover(
        path, cwd=project,
        options=ChildOptions(timeout=30, attempts=2, backoff=0.05, command=command),
    )  # fmt: skip
    assert out.exit_code == EXIT_FAILURE and len(out.attempts) == 2
    results = read_handover(path).handover.results
    assert results is not None and results.status == "failure"
    assert "all 2 attempt(s) failed" in (results.error or "")
    assert "scripted failure" in (results.error or "")
    hid = read_handover(path).handover.handover_id
    ledger = HandoverLedger.open(project / ".personae" / "state.db")
    try:
        entry = ledger.get(hid)
        assert entry is not None and entry.status == "failure"
        events = [e.event for e in ledger.events(hid)]
        assert events.count("attempt") == 2 and events[-1] == "result"
    finally:
        ledger.close()


def test_non_zero_exit_with_success_results_is_retried_no_more_than_asked(project: Path) -> None:
    path = make(project, {"exit": 7, "no_results": True})
    out = execute_handover(
        path, cwd=project,
        options=ChildOptions(timeout=30, attempts=2, backoff=0.01, command=command),
    )  # fmt: skip
    assert out.status == "failure" and [a.exit_code for a in out.attempts] == [7, 7]


def test_backoff_delays() -> None:
    assert backoff_delays(3) == [1.0, 2.0]
    assert backoff_delays(4, 0.5) == [0.5, 1.0, 2.0]
    assert backoff_delays(1) == []


def test_default_command_is_a_separate_personae_process(project: Path) -> None:
    spec = ChildSpec(
        handover_path=project / "h.json",
        persona="writer",
        timeout=12,
        return_path=project / "r.json",
        cwd=project,
        model="scripted:s.yaml",
    )
    assert personae_run_command(spec) == [
        sys.executable, "-m", "personae", "run", "--persona", "writer",
        "--context-from", str(project / "h.json"), "--non-interactive",
        "--handover-timeout", "12s", "--context-return", str(project / "r.json"),
        "--model", "scripted:s.yaml",
    ]  # fmt: skip


def test_cli_run_saves_error_when_child_fails(project: Path) -> None:
    """`handover run` spawns `personae run`; whatever it does, the outcome lands in the file.

    The model is valid but nothing listens at its address: the checks before the child pass,
    and the child's run fails."""
    path = make(project)
    env = {**os.environ, "OPENAI_BASE_URL": f"http://127.0.0.1:{free_port()}/v1"}
    out = subprocess.run(
        [sys.executable, "-m", "personae", "handover", "run", str(path),
         "--retries", "1", "--backoff", "0.05", "--timeout", "60",
         "--model", "openai-compatible:nothing-listens"],
        check=False, cwd=project, capture_output=True, text=True, timeout=180, env=env,
    )  # fmt: skip
    results = read_handover(path).handover.results
    assert results is not None
    expected = {"success": 0, "partial": 5, "failure": 3}[results.status]
    assert out.returncode == expected, out.stderr
    assert "attempt 1:" in out.stderr
    if results.status == "failure":
        assert "all 2 attempt(s) failed" in (results.error or "")


def test_cli_run_refuses_unsafe_file_without_spawning(project: Path) -> None:
    path = make(project)
    text = path.read_text().replace('"environment": {}', '"environment": {"LD_PRELOAD": "/x"}')
    path.write_text(text)
    out = subprocess.run(
        [sys.executable, "-m", "personae", "handover", "run", str(path)],
        check=False, cwd=project, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 1 and "LD_PRELOAD" in out.stderr
    assert read_handover(path).handover.results is None


def _summarize(project: Path, content: HandoverContent, **options: Any) -> HandoverToolResult:
    """The handover tool: data-analyst hands "Summarize" to report-writer in ``project``."""
    return handover_to_persona(
        "report-writer",
        "Summarize",
        source_persona="data-analyst",
        cwd=project,
        content=content,
        **options,
    )


def test_tool_waits_for_results(project: Path) -> None:
    child = ChildOptions(command=command, timeout=30)
    result = _summarize(project, HandoverContent(insights=["x"]), child=child)
    assert result.success and result.status == "success"
    assert result.results is not None and result.results["status"] == "success"
    assert "nextSteps" in result.results


def test_tool_returns_command_for_later(project: Path) -> None:
    notes = {"path": "notes.md", "type": "document", "description": "notes"}
    result = _summarize(project, HandoverContent(files=[notes]), wait_for_results=False)
    assert result.status == "prepared" and result.results is None
    assert "personae run --persona report-writer --context-from" in result.message
    assert Path(result.context_path).exists()
    assert not calls(project)


def test_tool_in_a_tool_registry(project: Path) -> None:
    import json

    from personae.errors import ToolError
    from personae.handover.tool import register_handover_tool
    from personae.tools.base import ToolContext
    from personae.tools.registry import ToolRegistry
    from personae.tools.workspace import Workspace

    registry = ToolRegistry(Workspace(project))
    register_handover_tool(
        registry, "data-analyst", child=ChildOptions(command=command, timeout=30)
    )
    tool = registry.get("handover_to_persona")
    assert {"targetPersona", "task", "files", "interactive"} <= set(tool.parameters["properties"])
    ctx = ToolContext(workspace=registry.workspace, tool=tool.name)
    text = run_async(
        tool.run({"target_persona": "report-writer", "task": "Summarize", "insights": ["i"]}, ctx)
    )
    result = json.loads(text)
    assert result["status"] == "success" and result["results"]["status"] == "success"
    with pytest.raises(ToolError, match="outside the allowed roots"):
        run_async(
            tool.run(
                {
                    "target_persona": "report-writer",
                    "task": "t",
                    "files": [{"path": "/etc/passwd", "type": "data"}],
                },
                ctx,
            )
        )


def test_interrupt_kills_child_group_and_records_failure(project: Path) -> None:
    import signal

    path = make(project, {"grandchild": True, "sleep": 60})
    tests_dir = Path(__file__).resolve().parent
    code = (
        "import sys; from pathlib import Path; "
        f"sys.path.insert(0, {str(tests_dir)!r}); "
        "from _handover_childprog import command; "
        "from personae.handover.child import ChildOptions, execute_handover; "
        f"execute_handover(Path({str(path)!r}), cwd=Path({str(project)!r}), "
        "options=ChildOptions(timeout=120, command=command))"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=project,
        stderr=subprocess.PIPE,
        text=True,
        # A test run started in the background inherits SIGINT ignored; Ctrl-C needs the default.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
    )
    hid = read_handover(path).handover.handover_id
    pidfile = project / f"grandchild-{hid}.pid"
    deadline = time.monotonic() + 60
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = int(pidfile.read_text())
    parent.send_signal(signal.SIGINT)
    _, err = parent.communicate(timeout=30)
    assert "KeyboardInterrupt" in err
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild)
    results = read_handover(path).handover.results
    assert results is not None and results.error == "interrupted during attempt 1"


def test_tool_fills_history_from_the_conversation_store(project: Path) -> None:
    import json

    from personae.store.conversations import ConversationStore, Message
    from personae.store.db import Store
    from personae.tokens.registry import counter_for_model

    store = Store(project / ".personae" / "state.db")
    conv = ConversationStore(store, counter_for_model(None))
    sid = conv.create_session(persona="data-analyst", title="analyse")
    conv.append(sid, Message(role="user", content="go"))
    conv.append(sid, Message(role="assistant", content="north grew 25%"))
    store.close()
    result = handover_to_persona(
        "report-writer", "Write", source_persona="data-analyst", cwd=project,
        content=HandoverContent(session_id=sid), wait_for_results=False,
    )  # fmt: skip
    saved = json.loads(Path(result.context_path).read_text())
    assert saved["context"]["history"][0]["summary"] == "north grew 25%"
    assert saved["source"]["sessionId"] == sid


def test_history_left_none_comes_from_the_store_also_without_project_facts(
    project: Path,
) -> None:
    """``from_project=False`` skips the cast, not the history; an empty history stays empty."""
    import json

    from personae.store.conversations import ConversationStore, Message
    from personae.store.db import Store
    from personae.tokens.registry import counter_for_model

    with Store(project / ".personae" / "state.db") as store:
        conv = ConversationStore(store, counter_for_model(None))
        sid = conv.create_session(persona="data-analyst", title="analyse")
        conv.append(sid, Message(role="user", content="go"))
        conv.append(sid, Message(role="assistant", content="south fell 4%"))
    read = handover_to_persona(
        "report-writer", "Write", source_persona="data-analyst", cwd=project,
        content=HandoverContent(session_id=sid), wait_for_results=False, from_project=False,
    )  # fmt: skip
    history = json.loads(Path(read.context_path).read_text())["context"]["history"]
    assert [e["summary"] for e in history] == ["south fell 4%"]
    empty = handover_to_persona(
        "report-writer", "Write", source_persona="data-analyst", cwd=project,
        content=HandoverContent(session_id=sid, history=()), wait_for_results=False,
    )  # fmt: skip
    assert json.loads(Path(empty.context_path).read_text())["context"]["history"] == []


def test_child_program_writes_results_through_runflow(tmp_path: Path) -> None:
    h = build_handover(source_persona="a", target_persona="b", task="go", cwd=tmp_path)
    path = write_handover(h, cwd=tmp_path).path
    done = subprocess.run(
        [sys.executable, str(CHILD), "--persona", "b", "--context-from", str(path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = read_handover(path).handover.results
    assert results is not None and results.output == "b did: go | history: "
    assert [c["persona"] for c in calls(tmp_path)] == ["b"]
