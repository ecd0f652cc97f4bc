"""``personae ui`` as a real server: loopback only, read-only, escaped, redacted, clear errors."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from _helpers import personae_cli
from _ui_support import viewer
from personae.store.answers import AnswerToolCall, ModelAnswer
from personae.store.db import Store
from personae.store.runs import RunStore

HOSTILE = "<script>alert('x')</script> & \"quotes\""
SECRET = "sk-proj0123456789abcdefghijklmn"


def _ui(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return personae_cli("ui", *args, cwd=cwd, timeout=60)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--port", "70000"], "70000 is not a port number"),
        (["--port", "eighty"], "'eighty' is not a port number"),
        (["--host", "0.0.0.0"], "not a loopback address"),
        (["--host", "192.168.1.10"], "not a loopback address"),
        (["--host", "example.com"], "not a loopback address"),
        (["--root", "missing-folder"], "not a folder"),
    ],
)
def test_bad_options_are_one_line_errors(tmp_path: Path, args: list[str], words: str) -> None:
    proc = _ui(*args, cwd=tmp_path)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("personae: error: ") and words in lines[0]


def test_a_taken_port_is_a_one_line_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _ui("--port", str(port), cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"personae: error: --port: cannot listen on 127.0.0.1:{port}: already in use"
    )


@pytest.fixture
def hostile_project(tmp_path: Path) -> tuple[Path, str]:
    """A project with one stored run whose texts carry markup and a credential."""
    root = tmp_path / "proj"
    with Store(root / ".personae" / "state.db") as store:
        runs = RunStore(store)
        rid = runs.create(task=f"{HOSTILE} key {SECRET}", model="scripted:x", persona="p<b>")
        runs.add_event(rid, seq=1, kind="start", at="2026-11-24T10:00:00.000+00:00",
                       message=HOSTILE, subtask=None,
                       data={"task": HOSTILE, "api_key": "plain-value-of-a-key"})  # fmt: skip
        runs.add_model_call(
            rid, role="worker", model="scripted:x",
            context_text=f"<task>\n{HOSTILE} {SECRET}\n</task>",
            budget={"role": "worker", "snapshot_id": "s", "counter": "chars",
                    "counter_exact": False, "history_path": "none",
                    "budget": 100, "total": 20, "overhead": 4, "sections": [
                {"tag": "task", "source": "task", "requested": 16, "allotted": 16,
                 "kept": 16, "rule": "pinned", "detail": HOSTILE}]},
            usage={"input_tokens": 20, "output_tokens": 3, "counted_input_tokens": 25,
                   "counter": "o200k_base", "counter_exact": True},
            # Built directly (not through ModelAnswer.build): the viewer redacts again.
            answer=ModelAnswer(
                text=f"{HOSTILE} said {SECRET}",
                tool_calls=[AnswerToolCall(name="x<i>",
                                           args='{"api_key": "plain-value-of-a-key"}')],
                finish_reason="stop",
            ),
        )  # fmt: skip
        runs.finish(rid, status="done", final_text=f"answer {HOSTILE}", usage={})
    return root, rid


@pytest.mark.process
def test_pages_escape_markup_and_hide_secrets(hostile_project: tuple[Path, str]) -> None:
    root, rid = hostile_project
    with viewer(root) as base:
        for path in ("/", f"/runs/{rid}", f"/runs/{rid}/calls/1", f"/fragments/runs/{rid}"):
            response = httpx.get(base + path, timeout=10)
            assert response.status_code == 200, path
            body = response.text
            assert "<script>alert" not in body, path
            assert SECRET not in body and "plain-value-of-a-key" not in body, path
        page = httpx.get(f"{base}/runs/{rid}/calls/1", timeout=10).text
        assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
        assert "[REDACTED:openai-key]" in page  # the markers of personae.security.redact
        # The stored answer: escaped, redacted, shown as the model's answer.
        assert (
            '<pre class="answer model-answer">&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;'
            in page
        )
        assert "<b>x&lt;i&gt;</b>" in page and "[REDACTED:secret-value]" in page
        # One input figure (the provider's) and the drift of ours, on the call and the run
        assert "20 (provider; ours +25.0%, o200k_base exact) in / 3 out" in page
        run_page = httpx.get(f"{base}/runs/{rid}", timeout=10).text
        assert "p&lt;b&gt;" in run_page
        assert "20 in (ours +25.0%) / 3 out" in run_page


@pytest.mark.process
def test_only_loopback_hosts_and_only_reads(hostile_project: tuple[Path, str]) -> None:
    root, rid = hostile_project
    with viewer(root) as base:
        ok = httpx.get(base + "/", timeout=10)
        assert ok.status_code == 200
        assert "script-src 'self'" in ok.headers["content-security-policy"]
        assert ok.headers["x-content-type-options"] == "nosniff"
        # A page fetched under another name (DNS rebinding) is refused.
        foreign = httpx.get(base + "/", headers={"Host": "attacker.example"}, timeout=10)
        assert foreign.status_code == 403
        for method in ("POST", "PUT", "DELETE"):
            assert httpx.request(method, f"{base}/runs/{rid}", timeout=10).status_code == 405
        missing = httpx.get(base + "/runs/run-nope", timeout=10)
        assert missing.status_code == 404
        assert "run-nope" in missing.text and rid in missing.text  # names the known runs
        assert httpx.get(base + "/static/../pyproject.toml", timeout=10).status_code == 404
        assert httpx.get(base + "/static/app.js", timeout=10).status_code == 200


@pytest.mark.process
def test_an_empty_folder_shows_no_runs_and_creates_nothing(tmp_path: Path) -> None:
    with viewer(tmp_path) as base:
        assert "No runs match" in httpx.get(base + "/", timeout=10).text
        assert "No chains here yet" in httpx.get(base + "/chains", timeout=10).text
    assert list(tmp_path.iterdir()) == []


@pytest.mark.process
def test_a_handover_that_is_a_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    chain = tmp_path / ".personae" / "chains" / "c1"
    (chain / "handovers").mkdir(parents=True)
    fifo = chain / "handovers" / "a.json"
    os.mkfifo(fifo)
    outside = tmp_path.parent / "outside.json"
    outside.write_text("{}", encoding="utf-8")
    steps = {
        "a": {"status": "success", "handover": str(fifo)},
        "b": {"status": "failure", "handover": str(outside), "error": "boom"},
    }
    body = {"workflow": str(tmp_path / "gone.yaml"), "updatedAt": "now", "steps": steps}
    (chain / "checkpoint.json").write_text(json.dumps(body), encoding="utf-8")
    with viewer(tmp_path) as base:
        page = httpx.get(base + "/chains/c1", timeout=10)
        assert page.status_code == 200
        assert "workflow file not readable" in page.text  # steps still shown, from the checkpoint
        assert page.text.count('class="node"') == 2
        fifo_page = httpx.get(base + "/chains/c1/handovers/a", timeout=10)
        assert fifo_page.status_code == 404 and "not a regular file" in fifo_page.text
        escape = httpx.get(base + "/chains/c1/handovers/b", timeout=10)
        assert escape.status_code == 404 and "escapes" in escape.text


@pytest.mark.serial  # a time bound: run alone, not beside the parallel workers
@pytest.mark.process
def test_ctrl_c_with_a_live_stream_open_stops_at_once_and_quietly(tmp_path: Path) -> None:
    with Store(tmp_path / ".personae" / "state.db") as store:
        rid = RunStore(store).create(task="still running", model="scripted:x")
    ended: list[str] = []
    with viewer(tmp_path, ended=ended) as base:
        host, port = base.removeprefix("http://").split(":")
        stream = socket.create_connection((host, int(port)), timeout=10)
        stream.sendall(f"GET /runs/{rid}/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        first = stream.recv(4096).decode()
        assert "text/event-stream" in first
        started = time.monotonic()
    took = time.monotonic() - started
    stream.close()
    assert ended == ["130", "personae: interrupted\n"]  # the CLI's Ctrl-C line, no traceback
    assert took < 2.0  # the stream ended with the server, not at a timeout
