"""One bootstrap unlocks one session: the gate decision against the session shapes hosts have.

In process, through the real gate (``run``) and the real mind service on a real SQLite
store: the session id comes from the host (hook payload, the MCP call's ``_meta``, the
server's environment), never from the model. The same cases in the real host binaries are
in ``tests/hosts_e2e/test_e2e_sessions.py``.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from personae.hosts.gate import run
from personae.mind.bootstraps import HostCall, host_session
from personae.mind.service import MindService
from personae.store.bootstraps import bootstrap_scope
from personae.store.db import Store

TOOLS = ["bootstrap_session"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / ".personae" / "memory").mkdir(parents=True)
    (tmp_path / ".personae" / "mind.md").write_text("You are Ada.\n", encoding="utf-8")
    return tmp_path


def _service(project: Path) -> MindService:
    db = project / ".personae" / "state.db"
    return MindService(
        project / ".personae" / "memory",
        project / ".personae" / "mind.md",
        Store(db),
        scope=bootstrap_scope(db),
    )


def _claude(project: Path, tool: str, session: str, call: str = "toolu_1") -> bytes:
    return json.dumps(
        {
            "session_id": session,
            "transcript_path": str(project / f"{session}.jsonl"),  # not written: lagging
            "cwd": str(project),
            "hook_event_name": "PreToolUse",
            "tool_name": tool,
            "tool_input": {},
            "tool_use_id": call,
        }
    ).encode()


def _gate(stdin: bytes, *args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(args), stdin=io.BytesIO(stdin), stdout=out, stderr=err)
    return code, out.getvalue() + err.getvalue()


BOOT = "mcp__personae__bootstrap_session"


def test_claude_clear_starts_a_session_that_stays_locked_until_it_bootstraps(
    project: Path,
) -> None:
    service = _service(project)
    # Session one: the gate sees the unlock call (and records its session), the server gets
    # the host's call id in _meta and binds the bootstrap to that session.
    assert _gate(_claude(project, BOOT, "one", "toolu_a"))[0] == 0
    service.bootstrap(None, TOOLS, HostCall("claude-code", {"claudecode/toolUseId": "toolu_a"}))
    assert _gate(_claude(project, "Bash", "one"))[0] == 0
    # /clear: same process, same server, a new session id. Locked.
    code, why = _gate(_claude(project, "Bash", "two"))
    assert code == 2 and "no recorded bootstrap for this session" in why
    assert _gate(_claude(project, BOOT, "two", "toolu_b"))[0] == 0
    service.bootstrap(None, TOOLS, HostCall("claude-code", {"claudecode/toolUseId": "toolu_b"}))
    assert _gate(_claude(project, "Bash", "two"))[0] == 0


def test_the_models_session_argument_unlocks_nothing(project: Path) -> None:
    service = _service(project)
    # A bootstrapped session's model names another session (one it is about to start with
    # `claude --session-id victim`, say): the argument is echoed, never recorded.
    packet = service.bootstrap("victim", TOOLS, HostCall("claude-code", {}))
    assert packet["mind_contract_available"] is True
    code, why = _gate(_claude(project, "Bash", "victim"))
    assert code == 2 and "no recorded bootstrap for this session" in why
    # A call id the gate never saw (no claim) binds to no session either.
    service.bootstrap(None, TOOLS, HostCall("claude-code", {"claudecode/toolUseId": "toolu_x"}))
    assert _gate(_claude(project, "Bash", "victim"))[0] == 2


def test_a_claim_binds_only_its_own_call(project: Path) -> None:
    service = _service(project)
    assert _gate(_claude(project, BOOT, "mine", "toolu_1"))[0] == 0
    # Another call id (another session's bootstrap call) does not pick up this claim.
    service.bootstrap(None, TOOLS, HostCall("claude-code", {"claudecode/toolUseId": "toolu_2"}))
    assert _gate(_claude(project, "Bash", "mine"))[0] == 2
    # A degraded bootstrap records nothing, claim or not.
    (project / ".personae" / "mind.md").unlink()
    service.bootstrap(None, TOOLS, HostCall("claude-code", {"claudecode/toolUseId": "toolu_1"}))
    assert _gate(_claude(project, "Bash", "mine"))[0] == 2


def test_codex_names_the_session_in_each_calls_meta(project: Path) -> None:
    service = _service(project)
    meta = {"sessionId": "codex-1", "callId": "call_1", "threadId": "codex-1"}
    service.bootstrap(None, TOOLS, HostCall("codex-mcp-client", meta))
    payload = json.loads(_claude(project, "Bash", "codex-1"))
    payload["turn_id"] = "t1"
    assert _gate(json.dumps(payload).encode(), "--host", "codex")[0] == 0
    payload["session_id"] = "codex-2"  # a new thread (or a nested codex)
    assert _gate(json.dumps(payload).encode(), "--host", "codex")[0] == 2


def test_copilot_acp_sessions_each_have_their_own_server(project: Path) -> None:
    # `copilot --acp` starts one MCP server per session and names it in the environment.
    service = _service(project)
    call = HostCall("copilot-cli", {"progressToken": 1})
    session = host_session(call, lambda _: None, {"COPILOT_AGENT_SESSION_ID": "acp-1"})
    assert session == "acp-1"
    service.index.record_bootstrap(session, "h", None, service.scope)

    def hook(session: str) -> bytes:
        return json.dumps({"sessionId": session, "cwd": str(project), "toolName": "bash"}).encode()

    assert _gate(hook("acp-1")) == (0, "")
    code, out = _gate(hook("acp-2"))
    assert code == 0 and json.loads(out)["permissionDecision"] == "deny"
    # The variable means a session only for Copilot: another client inheriting it (a host
    # started from Copilot's shell) does not bind to it.
    other = HostCall("claude-code", {})
    assert host_session(other, lambda _: None, {"COPILOT_AGENT_SESSION_ID": "acp-1"}) is None


def test_another_projects_rows_unlock_nothing(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    other = tmp_path_factory.mktemp("other")
    (other / ".personae").mkdir()
    # The same session id bootstrapped in another project (one store file per project
    # here; on a shared PostgreSQL database see tests/test_store_postgres.py).
    service = _service(project)
    service.bootstrap(None, TOOLS, HostCall("codex-mcp-client", {"sessionId": "s"}))
    assert _gate(_claude(project, "Bash", "s"))[0] == 0
    with Store(other / ".personae" / "state.db") as store:
        store.conn.execute(
            "INSERT INTO mind_bootstraps(session_id, contract_hash, scope) VALUES (?, ?, ?)",
            ("s", "h", bootstrap_scope(project / ".personae" / "state.db")),
        )
        store.conn.commit()
    code, why = _gate(_claude(other, "Bash", "s"))
    assert code == 2 and "no recorded bootstrap for this session" in why
