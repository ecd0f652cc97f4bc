"""The PreToolUse gate: corpus of transcripts, every input shape, the store fallback."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from personae.hosts.gate import (
    DEFAULT_GATES,
    HookInputError,
    compile_gates,
    decide,
    parse_hook_input,
    run,
    session_start,
)
from personae.mind.bootstraps import ProcessId, bootstrap_scope, nearest_host
from personae.mind.index import MindIndex
from personae.store.db import Store

CORPUS = Path(__file__).parent / "data" / "transcripts"


CASES = json.loads((CORPUS / "cases.json").read_text(encoding="utf-8"))
GATES = compile_gates(list(DEFAULT_GATES))


def _claude(
    tool: str, transcript: Path | None, *, session: str = "s1", cwd: Path | None = None
) -> bytes:
    payload = {
        "session_id": session,
        "transcript_path": str(transcript) if transcript else None,
        "cwd": str(cwd or CORPUS),
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": {"command": "ls"},
        "tool_use_id": "toolu_now",
        "some_future_field": {"x": 1},
    }
    return json.dumps(payload).encode()


def _run(stdin: bytes, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(args), stdin=io.BytesIO(stdin), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_corpus_covers_every_shape_and_failure() -> None:
    allowed = [n for n, c in CASES.items() if c["allow"]]
    blocked = [n for n, c in CASES.items() if not c["allow"]]
    assert len(allowed) >= 8 and len(blocked) >= 14
    for shape in ("json_string", "text_blocks", "result_wrapper", "persisted"):
        assert any(shape in n for n in allowed), shape


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_decision(name: str, tmp_path: Path) -> None:
    expected = CASES[name]
    # cwd without a store: the transcript alone decides.
    code, _out, err = _run(_claude("Bash", CORPUS / name, cwd=tmp_path))
    assert code == (0 if expected["allow"] else 2), err
    if not expected["allow"]:
        assert expected["reason"] in err
        assert "bootstrap_session" in err


@pytest.mark.process
def test_gate_as_a_real_subprocess() -> None:
    cmd = [sys.executable, "-m", "personae", "hook", "pre-tool-use", "--gate", "Bash"]
    ok = subprocess.run(
        cmd,
        input=_claude("Bash", CORPUS / "ok_json_string.jsonl"),
        capture_output=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run(
        cmd,
        input=_claude("Bash", CORPUS / "block_flag_false.jsonl"),
        capture_output=True,
        check=False,
    )
    assert bad.returncode == 2
    assert b"mind_contract_available false" in bad.stderr


def test_non_gated_tools_always_pass(tmp_path: Path) -> None:
    for tool in ("Read", "Grep", "mcp__personae__recall", "mcp__personae__bootstrap_session"):
        code, _, _ = _run(_claude(tool, tmp_path / "missing.jsonl"))
        assert code == 0, tool
    code, _, _ = _run(_claude("Bash", tmp_path / "missing.jsonl"), "--gate", "Write")
    assert code == 0


def test_gate_patterns_match_the_whole_name(tmp_path: Path) -> None:
    code, _, _ = _run(_claude("BashOutput", tmp_path / "x"), "--gate", "Bash")
    assert code == 0
    code, _, err = _run(_claude("mcp__github__create_issue", tmp_path / "x"))
    assert code == 2 and "unreadable" in err


def test_bootstrap_tool_is_never_gated(tmp_path: Path) -> None:
    code, _, _ = _run(_claude("mcp__personae__bootstrap_session", tmp_path / "x"), "--gate", ".*")
    assert code == 0


@pytest.mark.parametrize(
    "stdin",
    [b"", b"not json", b"[1, 2]", b'{"tool_input": {}}', b'{"tool_name": ""}', b"\xff\xfe"],
)
def test_malformed_stdin_blocks(stdin: bytes) -> None:
    code, _, err = _run(stdin)
    assert code == 2
    assert err.startswith("personae gate: blocked")


def test_bad_gate_pattern_blocks() -> None:
    code, _, err = _run(_claude("Read", None), "--gate", "(")
    assert code == 2 and "bad --gate pattern" in err


def test_missing_transcript_blocks_without_store(tmp_path: Path) -> None:
    code, _, err = _run(_claude("Bash", tmp_path / "nope.jsonl", cwd=tmp_path))
    assert code == 2 and "transcript unreadable" in err
    payload = json.loads(_claude("Bash", None, cwd=tmp_path))
    del payload["transcript_path"]
    code, _, err = _run(json.dumps(payload).encode())
    assert code == 2 and "no transcript_path" in err


def test_unreadable_transcript_blocks(tmp_path: Path) -> None:
    folder = tmp_path / "dir.jsonl"
    folder.mkdir()
    code, _, err = _run(_claude("Bash", folder, cwd=tmp_path))
    assert code == 2 and "not a regular file" in err


def _record(cwd: Path, session: str | None, host: ProcessId | None = None) -> None:
    path = cwd / ".personae" / "state.db"
    with Store(path) as store:
        binding = None if host is None else (host.pid, host.started)
        MindIndex(store).record_bootstrap(session, "hash", binding, bootstrap_scope(path))


def test_store_record_rescues_a_lagging_transcript(tmp_path: Path) -> None:
    _record(tmp_path, "s1")
    lagging = CORPUS / "block_call_without_result.jsonl"
    code, _, err = _run(_claude("Bash", lagging, session="s1", cwd=tmp_path))
    assert code == 0, err
    code, _, _ = _run(_claude("Bash", tmp_path / "missing.jsonl", session="s1", cwd=tmp_path))
    assert code == 0
    # Another session is not unlocked by s1's bootstrap.
    code, _, err = _run(_claude("Bash", lagging, session="s2", cwd=tmp_path))
    assert code == 2 and "no recorded bootstrap" in err


def test_a_host_started_in_a_subfolder_finds_its_projects_store(tmp_path: Path) -> None:
    _record(tmp_path, "s1")
    deep = tmp_path / "src" / "pkg"
    deep.mkdir(parents=True)
    code, _, err = _run(_claude("Bash", tmp_path / "missing.jsonl", session="s1", cwd=deep))
    assert code == 0, err  # the store `personae serve` records in, as it finds the project
    code, _, err = _run(_claude("Bash", tmp_path / "missing.jsonl", session="s2", cwd=deep))
    assert code == 2 and "no recorded bootstrap" in err


def test_explicit_failure_in_transcript_wins_over_store(tmp_path: Path) -> None:
    _record(tmp_path, "s1")
    code, _, _ = _run(_claude("Bash", CORPUS / "block_flag_false.jsonl", cwd=tmp_path))
    assert code == 2


def test_store_option_points_at_a_store(tmp_path: Path) -> None:
    project = tmp_path / "project"
    _record(project, "s9")
    store = project / ".personae" / "state.db"
    stdin = _claude("Bash", tmp_path / "missing.jsonl", session="s9", cwd=tmp_path / "elsewhere")
    assert _run(stdin)[0] == 2
    assert _run(stdin, "--store", str(store))[0] == 0


def test_copilot_shape(tmp_path: Path) -> None:
    payload = {"timestamp": 1, "cwd": str(tmp_path), "toolName": "bash", "toolArgs": "{}"}
    code, out, err = _run(json.dumps(payload).encode())
    # Copilot's deny contract: JSON on stdout and exit 0 (a non-zero exit is skipped).
    assert code == 0 and err == ""
    assert json.loads(out)["permissionDecision"] == "deny"
    assert "bootstrap_session" in json.loads(out)["permissionDecisionReason"]
    # A bootstrap recorded without a host process or session does not unlock Copilot.
    _record(tmp_path, None)
    assert json.loads(_run(json.dumps(payload).encode())[1])["permissionDecision"] == "deny"
    # One recorded for the host process this gate runs under does (the payload has no
    # session id: the nearest host process is the key).
    host = nearest_host()
    assert host is not None
    _record(tmp_path, None, host=host)
    code, out, _ = _run(json.dumps(payload).encode())
    assert code == 0 and out == ""
    # With a session id in the payload, only that session's bootstrap counts.
    session = json.dumps({**payload, "sessionId": "copilot-2"}).encode()
    assert json.loads(_run(session)[1])["permissionDecision"] == "deny"
    _record(tmp_path, "copilot-2")
    assert _run(session) == (0, "", "")
    hook = parse_hook_input(json.dumps(payload))
    assert hook.host == "copilot" and hook.tool_name == "bash"
    payload["toolName"] = "view"
    assert _run(json.dumps(payload).encode())[0] == 0


def test_parse_hook_input_shapes() -> None:
    hook = parse_hook_input(_claude("Bash", CORPUS / "x.jsonl"))
    assert (hook.host, hook.tool_name, hook.session_id) == ("claude", "Bash", "s1")
    with pytest.raises(HookInputError):
        parse_hook_input(b"{}")


def test_decide_is_pure_and_reports_reasons(tmp_path: Path) -> None:
    hook = parse_hook_input(_claude("Edit", CORPUS / "ok_text_blocks.jsonl", cwd=tmp_path))
    decision = decide(hook, GATES)
    assert decision.allow and "succeeded" in decision.reason


def test_session_start_hook_names_the_session() -> None:
    out = io.StringIO()
    assert session_start(io.BytesIO(b'{"session_id": "abc-123"}'), out) == 0
    context = json.loads(out.getvalue())["hookSpecificOutput"]["additionalContext"]
    assert 'bootstrap_session(session_id="abc-123")' in context
    assert len(context) < 10_000
    out = io.StringIO()
    assert session_start(io.BytesIO(b'{"session_id": "x\\"); evil"}'), out) == 0
    assert "evil" not in out.getvalue()
