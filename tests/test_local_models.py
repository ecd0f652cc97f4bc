"""Local model servers, deterministically: output modes, known windows, bounded calls, quirks.

The scripted server imitates a real server (``server:`` in its scenario): it tells its
window the way llama.cpp, vLLM or Ollama do (or, like llama-cpp-python, only in its
overflow error), refuses what that server refuses, and cuts answers at ``max_tokens``.
It is not a real model: tests/test_real_model.py runs the same paths on one.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic_ai.models import override_allow_model_requests

from _helpers import run_async, run_local_server_turn, team_project
from conftest import flat
from personae.models import ModelResolver, learned
from personae.models.output import extract_json, response_format
from personae.models.scripted import ScriptedServer
from personae.models.servers import discover, overflow_window
from personae.team.result import RunResult
from personae.team.session import RunOptions, run_turn
from personae.team.signals import Plan
from personae.team.structured import wire_schema


@pytest.fixture(autouse=True)
def scripted_requests() -> Any:
    """The conftest forbids model requests; these go to the scripted server only."""
    with override_allow_model_requests(True):
        yield


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data folder per test: windows learned from a server are remembered there."""
    home = tmp_path / "personae-home"
    monkeypatch.setenv("PERSONAE_HOME", str(home))
    return home


PLAN = {"subtasks": [{"description": "Read config.yaml", "requirements": ["port found"]}]}
VERDICT = {
    "approved": True,
    "requirements_met": True,
    "completion_signal": {"confidence": "high", "progress_made": True},
}


def _scenario(tmp_path: Path, steps: list[dict[str, Any]], **server: Any) -> str:
    body: dict[str, Any] = {"steps": steps}
    if server:
        body["server"] = server
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump(body))
    return f"scripted:{path}"


def _read_steps(plan_text: str, verdict_text: str) -> list[dict[str, Any]]:
    return [
        {"when": {"role": "manager"}, "text": plan_text},
        {"when": {"role": "worker"},
         "tool_calls": [{"name": "read_file", "args": {"path": "config.yaml"}}]},
        {"when": {"role": "worker"}, "text": "config.yaml says port 8081."},
        {"when": {"role": "validator"}, "text": verdict_text},
        {"when": {"role": "manager"}, "text": "The port is 8081."},
    ]  # fmt: skip


def _run(
    root: Path, spec: str, monkeypatch: pytest.MonkeyPatch, **options: Any
) -> tuple[RunResult[Any], list[dict[str, Any]]]:
    """One run of ``openai:smollm2`` against the scripted server of ``spec`` (as a user
    runs a local server: OPENAI_BASE_URL); returns the outcome and the chat requests."""
    with ScriptedServer(Path(spec.removeprefix("scripted:"))) as server:
        outcome, _, chat = run_local_server_turn(
            root, server.base_url, server.raw_requests, monkeypatch, **options
        )
    return outcome, chat


def _warnings(outcome: RunResult[Any], action: str) -> list[Any]:
    return [
        e for e in outcome.events if e.kind.value == "warning" and e.data.get("action") == action
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"subtasks": [{"description": "a"}]}', {"subtasks": [{"description": "a"}]}),
        ('Here is the plan:\n```json\n{"subtasks": []}\n```\nDone.', {"subtasks": []}),
        ('{"name": "final_result", "arguments": {"subtasks": [1]}}', {"subtasks": [1]}),
        ('{"name": "final_result", "arguments": "{\\"subtasks\\": [2]}"}', {"subtasks": [2]}),
        ('Sure! {"plan": {"subtasks": [3]}} hope it helps', {"subtasks": [3]}),
        ('I think {"x": 1} then {"subtasks": [4]}', {"subtasks": [4]}),
        ("no JSON here at all", None),
        ('{"subtasks": [5', None),
    ],
)
def test_lenient_extraction_reads_what_small_models_print(text: str, expected: Any) -> None:
    assert extract_json(text, frozenset({"subtasks", "rationale"})) == expected


def test_the_wire_schema_is_self_contained_and_bounded() -> None:
    schema = wire_schema(Plan)
    text = json.dumps(schema)
    assert "$ref" not in text and "$defs" not in text
    subtasks = schema["properties"]["subtasks"]
    assert subtasks["maxItems"] == 5
    assert subtasks["items"]["properties"]["description"]["maxLength"] == 300
    assert response_format("llama-cpp-python", "plan", schema) == {
        "type": "json_object", "schema": schema,
    }  # fmt: skip
    assert response_format("vllm", "plan", schema)["type"] == "json_schema"


@pytest.mark.parametrize(
    ("message", "window"),
    [
        ("Requested tokens (5000) exceed context window of 2048", 2048),
        ("This model's maximum context length is 8192 tokens. However, you requested", 8192),
        ("the request exceeds the available context size (n_prompt_tokens=9, n_ctx=4096)", 4096),
        ("HTTP 500: something else", None),
    ],
)
def test_overflow_errors_state_the_window(message: str, window: int | None) -> None:
    assert overflow_window(message) == window


@pytest.mark.parametrize(
    ("kind", "source"),
    [
        ("llama.cpp", "the server's /props"),
        ("vllm", "the server's /v1/models"),
        ("ollama", "the server's /api/show"),
        ("llama-cpp-python", "the server's overflow error"),
    ],
)
def test_discovery_asks_each_server_the_way_it_tells(
    tmp_path: Path, kind: str, source: str
) -> None:
    spec = _scenario(tmp_path, [{"text": "unused"}], kind=kind, window=3072)
    with ScriptedServer(Path(spec.removeprefix("scripted:"))) as server:
        facts = discover(server.base_url, server.model_name)
    assert (facts.kind, facts.window, facts.source) == (kind, 3072, source)


def test_a_llama_cpp_python_run_discovers_the_window_caps_every_request_and_parses_loose_json(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = team_project(tmp_path / "proj")
    wrapped = json.dumps({"name": "final_result", "arguments": PLAN})
    fenced = f"Verdict:\n```json\n{json.dumps(VERDICT)}\n```"
    spec = _scenario(tmp_path, _read_steps(wrapped, fenced), kind="llama-cpp-python", window=4096)
    outcome, requests = _run(root, spec, monkeypatch)
    assert outcome.status == "done", outcome.answer
    assert outcome.answer.startswith("The port is 8081.")
    # every request caps its output at a quarter of the discovered window
    assert requests and all(body.get("max_tokens") == 1024 for body in requests)
    assert not any("max_completion_tokens" in body for body in requests)
    # plan and verdict: native constrained decoding in llama-cpp-python's own form
    structured = [b for b in requests if "response_format" in b]
    assert len(structured) == 2
    assert all(b["response_format"]["type"] == "json_object" for b in structured)
    assert structured[0]["response_format"]["schema"]["properties"]["subtasks"]["maxItems"] == 5
    # the tool turn went back with empty text, not content: null (which this server refuses)
    tool_turns = [m for b in requests for m in b["messages"] if m.get("tool_calls")]
    assert tool_turns and all(m["content"] == "" for m in tool_turns)
    assert not _warnings(outcome, "window_guessed")
    budgets = [c for c in outcome.events if c.kind.value == "plan"]
    assert budgets  # the plan parsed (no fallback)
    assert not _warnings(outcome, "plan_unparsed")


def test_content_null_is_what_this_server_refuses(tmp_path: Path) -> None:
    """The imitation keeps llama-cpp-python's habit: the plain OpenAI model's tool turn
    (``content: null``) gets HTTP 500, so the quirk handling above is what makes it work."""
    spec = _scenario(tmp_path, [{"text": "unused"}], kind="llama-cpp-python", window=4096)
    with ScriptedServer(Path(spec.removeprefix("scripted:"))) as server:
        body = {"messages": [{"role": "user", "content": "hi"},
                             {"role": "assistant", "content": None, "tool_calls": []}]}  # fmt: skip
        status, payload = server.answer(body)
    assert status == 500 and "valid string" in payload["error"]["message"]


def test_a_plan_that_never_parses_runs_the_task_as_one_subtask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = team_project(tmp_path / "proj")
    prose = {"when": {"role": "manager"}, "text": "First read the config, then answer."}
    steps = [prose, prose, prose, *_read_steps("unused", json.dumps(VERDICT))[1:]]
    spec = _scenario(tmp_path, steps, kind="llama-cpp-python", window=4096)
    outcome, requests = _run(root, spec, monkeypatch)
    assert len([b for b in requests if "response_format" in b]) == 4  # 3 plans, 1 verdict
    warned = _warnings(outcome, "plan_unparsed")
    assert len(warned) == 1
    assert (
        "manager" in warned[0].message
        and "llama-cpp-python at http://127.0.0.1" in warned[0].message
    )
    assert "in 3 tries" in warned[0].message
    assert outcome.status == "done"
    assert [o.description for o in outcome.subtasks] == ["What port does the service use?"]


def test_a_verdict_that_never_parses_is_not_validated_never_approved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = team_project(tmp_path / "proj")
    garbled = {"when": {"role": "validator"}, "text": "Looks fine to me!"}
    steps = _read_steps(json.dumps(PLAN), "unused")
    steps = [*steps[:3], *[garbled] * 4, steps[4]]
    spec = _scenario(tmp_path, steps, kind="llama-cpp-python", window=4096)
    outcome, _ = _run(root, spec, monkeypatch)
    assert outcome.status == "partial"
    assert [o.status for o in outcome.subtasks] == ["unvalidated"]
    assert not [e for e in outcome.events if e.kind.value == "validation"]


def test_the_window_flag_and_config_win_over_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = team_project(tmp_path / "proj")
    steps = _read_steps(json.dumps(PLAN), json.dumps(VERDICT))
    spec = _scenario(tmp_path, steps, kind="vllm", window=100_000)
    outcome, requests = _run(root, spec, monkeypatch, model_window=2048)
    assert all(body["max_tokens"] == 512 for body in requests)
    assert outcome.status == "done"


def test_an_unknown_window_is_guessed_once_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that tells nothing about its window (the plain scripted server): one
    warning naming the guess and the fix."""
    root = team_project(tmp_path / "proj")
    plan = {"when": {"role": "manager"}, "output": PLAN}
    steps = [plan, *_read_steps("", "")[1:3], {"when": {"role": "validator"}, "output": VERDICT},
             {"when": {"role": "manager"}, "text": "8081"}]  # fmt: skip
    outcome, requests = _run(root, _scenario(tmp_path, steps), monkeypatch)
    warned = _warnings(outcome, "window_guessed")
    assert len(warned) == 1 and "--window" in warned[0].message
    assert "128,000" in warned[0].message and "openai:smollm2" in warned[0].message
    assert all(body["max_tokens"] == 4096 for body in requests)
    assert outcome.status == "done"


def test_an_overflow_is_one_line_naming_the_window_and_the_fix(tmp_path: Path, cli: Any) -> None:
    root = team_project(tmp_path / "proj")
    (root / ".personae").mkdir(exist_ok=True)
    spec = _scenario(tmp_path, _read_steps(json.dumps(PLAN), json.dumps(VERDICT)),
                     kind="llama-cpp-python", window=300)  # fmt: skip
    done = cli("run", "What port?", "--persona", "dev", "--model", spec, "--window", "100000",
               cwd=root)  # fmt: skip
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    text = flat(done.stderr)
    assert "does not fit the 300-token window" in text and "--window 300" in text, text
    assert "manager" in text


def test_a_slow_worker_call_times_out_and_the_run_still_ends(tmp_path: Path, cli: Any) -> None:
    root = team_project(tmp_path / "proj")
    (root / ".personae").mkdir(exist_ok=True)
    steps = _read_steps(json.dumps(PLAN), json.dumps(VERDICT))
    steps[1] = {**steps[1], "delay": 3.0}
    spec = _scenario(tmp_path, steps[:2], kind="llama.cpp", window=4096)
    done = cli("run", "What port?", "--persona", "dev", "--model", spec, "--json",
               "--call-timeout", "1", cwd=root, timeout=60)  # fmt: skip
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    stopped = [e for e in events if e["data"].get("action") == "worker_stopped"]
    assert stopped and "took longer than 1 s" in stopped[0]["message"], done.stdout
    assert events[-1]["kind"] == "final" and events[-1]["data"]["status"] == "partial"
    assert not [e for e in events if e["kind"] == "call"]  # live-view only


def test_the_deadline_stops_the_run_before_the_next_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the deadline no request starts: the run ends partial, the rest skipped, with the
    reason (whether the deadline passes while planning or while the worker waits)."""
    root = team_project(tmp_path / "proj")
    steps = _read_steps(json.dumps(PLAN), json.dumps(VERDICT))
    steps[1] = {**steps[1], "delay": 3.0}
    spec = _scenario(tmp_path, steps[:2], kind="llama.cpp", window=4096)
    outcome, requests = _run(root, spec, monkeypatch, deadline=2.0)
    assert len(requests) <= 2  # the plan and the worker's first call at most
    warned = _warnings(outcome, "usage_cap")
    assert warned and "deadline of 2 s" in warned[0].message
    assert outcome.status == "partial"
    assert [o.status for o in outcome.subtasks] == ["skipped"] or len(requests) == 2
    assert outcome.events[-1].kind.value == "final"


def test_models_entries_are_checked_when_the_config_is_read(tmp_path: Path, cli: Any) -> None:
    root = team_project(tmp_path / "proj")
    (root / ".personae").mkdir(exist_ok=True)
    (root / ".personae" / "config.yaml").write_text(
        "models:\n  openai:smollm2:\n    output_mode: grammar\n"
    )
    done = cli("run", "x", "--model", "openai:smollm2", cwd=root)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "output_mode" in flat(done.stderr) and "config.yaml" in flat(done.stderr)


def test_the_local_models_doc_holds(cli: Any) -> None:
    """docs/local-models.md: its config block is a valid project config; its flags exist."""
    from personae.project import ProjectConfig

    doc = (Path(__file__).resolve().parents[1] / "docs" / "local-models.md").read_text()
    blocks = doc.split("```yaml\n")[1:]
    assert blocks
    for block in blocks:
        config = ProjectConfig.model_validate(yaml.safe_load(block.split("```")[0]))
        entry = config.models["openai:smollm2"]
        assert (entry.context_window, entry.output_mode) == (2048, "native")
        assert config.timeouts.per_role() == {"manager": 120, "worker": 300, "validator": 60}
    helped = flat(cli("run", "--help", check=True).stdout)
    for flag in ("--window", "--call-timeout", "--deadline"):
        assert flag in helped and flag in doc


LONG_ANSWER = "The service reads config.yaml, where the port is set: it listens on 8081."


def test_the_live_view_counts_the_tokens_of_a_call_as_they_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Any
) -> None:
    """Every call streams (``stream: true``, as to a real server); while the worker's answer
    arrives piece by piece, ``call`` events say how many tokens have arrived so far. This
    imitation (like llama-cpp-python) sends no usage in a stream: the run counts it."""
    from personae.cli._options import call_line
    from personae.team.events import CallProgress

    root = team_project(tmp_path / "proj")
    steps = _read_steps(json.dumps(PLAN), json.dumps(VERDICT))
    steps[2] = {**steps[2], "text": LONG_ANSWER, "stream_pause": 0.15}
    spec = _scenario(tmp_path, steps, kind="llama-cpp-python", window=4096)
    seen: list[CallProgress] = []

    def listen(event: Any) -> None:
        if isinstance(event, CallProgress):
            seen.append(event)

    with ScriptedServer(Path(spec.removeprefix("scripted:"))) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        resolver = ModelResolver(default="openai:smollm2")
        options = RunOptions(root=root, persona="dev", include_git_log=False)
        try:
            outcome = run_async(run_turn("What port does the service use?", options,
                                         listeners=[listen], resolver=resolver))  # fmt: skip
        finally:
            resolver.close()
        chat = [b for route, b in server.raw_requests if route.endswith("/chat/completions")]
    assert outcome.status == "done", outcome.answer
    asked = [b for b in chat if b.get("max_tokens") != 1]  # not the window probe
    assert asked and all(b.get("stream") is True for b in asked)
    worker = [e for e in seen if e.role == "worker"]
    phases = [e.phase for e in worker]
    assert phases[0] == "start" and phases[-1] == "end", phases
    streamed = [e for e in worker if e.phase == "tokens"]
    assert len(streamed) >= 4, phases  # the answer took 14 pieces (words) 0.15 s apart
    counts = [e.output_tokens for e in streamed]
    assert counts == sorted(counts) and counts[0] < counts[-1], counts
    assert all(a.seconds < b.seconds for a, b in itertools.pairwise(streamed))
    end = worker[-1]
    assert 0 < counts[-1] <= end.output_tokens  # the last pieces may come after the last count
    assert all(e.max_tokens == 1024 and e.timeout > 0 for e in streamed)
    line = call_line(streamed[-1])
    assert line.startswith("worker (subtask 1): openai:smollm2 writing, ") and (
        f"{counts[-1]} of at most 1024 tokens so far" in line
    ), line
    # no usage came with the streams: the stored calls carry our own count, marked as ours
    assert outcome.usage.output_tokens >= end.output_tokens > 0
    assert outcome.usage.input_tokens > 0
    shown = json.loads(cli("runs", "show", outcome.run_id, "--json", cwd=root).stdout)
    usages = [c["usage"] for c in shown["model_calls"]]
    assert usages and all(u["reported"] is False and u["output_tokens"] > 0 for u in usages)


def test_a_client_that_hangs_up_mid_answer_prints_nothing(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A call's timeout or the run's deadline hangs up on the server mid-answer: the
    scripted server ends that request quietly (no traceback in the user's terminal)."""
    import socket
    import time

    spec = _scenario(tmp_path, [{"text": LONG_ANSWER, "stream_pause": 0.05, "delay": 0.3}])
    with ScriptedServer(Path(spec.removeprefix("scripted:"))) as server:
        body = json.dumps({"model": "m", "stream": True,
                           "messages": [{"role": "user", "content": "hi"}]}).encode()  # fmt: skip
        port = int(server.base_url.split(":")[-1].split("/")[0])
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))  # fmt: skip
        time.sleep(1.5)  # the answer is written (14 pieces) to a client that is gone
        assert len(server.requests) == 1
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception occurred" not in err, err


def test_a_window_learned_from_an_overflow_error_is_remembered_for_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, private_home: Path, cli: Any
) -> None:
    """llama-cpp-python states its window only when it refuses a too-long prompt: that
    probe is sent once, and the window kept in the data folder; the next run against the
    same server and model sends no probe. A request that overflows during a run (the
    window kept is wrong: the server was restarted smaller) rewrites what is kept."""
    root = team_project(tmp_path / "proj")
    (root / ".personae").mkdir(exist_ok=True)
    spec = _scenario(tmp_path, _read_steps(json.dumps(PLAN), json.dumps(VERDICT)),
                     kind="llama-cpp-python", window=300)  # fmt: skip
    with ScriptedServer(Path(spec.removeprefix("scripted:"))) as server:
        url = server.base_url
        monkeypatch.setenv("OPENAI_BASE_URL", url)

        def probes() -> int:
            return sum(1 for _, body in server.raw_requests if body.get("max_tokens") == 1)

        first = ModelResolver(default="openai:smollm2")
        facts = first.facts()
        first.close()
        assert (facts.window, facts.guessed, probes()) == (300, False, 1)
        assert learned.windows_file() == private_home / "cache" / "windows.json"
        assert learned.recall(server.base_url, "smollm2") == (300, "llama-cpp-python")
        second = ModelResolver(default="openai:smollm2")
        again = second.facts()
        second.close()
        assert (again.window, again.guessed, probes()) == (300, False, 1)  # no second probe
        assert "remembered" in again.window_source and again.server == "llama-cpp-python"

        learned.remember(server.base_url, "smollm2", 100_000, "llama-cpp-python")
        done = cli("run", "What port?", "--persona", "dev", "--model", "openai:smollm2",
                   cwd=root)  # fmt: skip
        assert probes() == 1
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "does not fit the 300-token window" in flat(done.stderr), done.stderr
    assert learned.recall(url, "smollm2") == (300, "llama-cpp-python")
    assert learned.recall(url, "smollm2", now=10**12) is None  # kept a day
