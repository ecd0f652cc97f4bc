"""A run's first request goes out before the engine loads, and is answered once.

The scripted server imitates the local servers (``server:`` in its scenario) and
records every request it gets, so a request sent twice would show; it is not a model.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from pydantic_ai.models import override_allow_model_requests

from _helpers import run_async, run_local_server_turn, team_project
from personae.models import ModelResolver
from personae.models._early_transport import EarlyTransport
from personae.models.early import EarlyRequest
from personae.models.scripted import ScriptedServer
from personae.team.hooks import RunHooks
from personae.team.result import RunResult

PLAN = {"subtasks": [{"description": "Read config.yaml", "requirements": ["port found"]}]}
VERDICT = {
    "approved": True,
    "requirements_met": True,
    "completion_signal": {"confidence": "high", "progress_made": True},
}
IMITATION = {"kind": "llama-cpp-python", "window": 4096}
STEPS = [
    {"when": {"role": "manager"}, "text": json.dumps(PLAN)},
    {"when": {"role": "worker"},
     "tool_calls": [{"name": "read_file", "args": {"path": "config.yaml"}}]},
    {"when": {"role": "worker"}, "text": "config.yaml says port 8081."},
    {"when": {"role": "validator"}, "text": json.dumps(VERDICT)},
    {"when": {"role": "manager"}, "text": "The port is 8081."},
]  # fmt: skip


@pytest.fixture(autouse=True)
def scripted_requests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Requests go to the scripted server only; windows are remembered per test."""
    monkeypatch.setenv("PERSONAE_HOME", str(tmp_path / "personae-home"))
    with override_allow_model_requests(True):
        yield


def _server(tmp_path: Path, kind: str) -> ScriptedServer:
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump({"steps": STEPS, "server": {"kind": kind, "window": 4096}}))
    return ScriptedServer(path)


def _run(
    root: Path, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, **options: Any
) -> tuple[RunResult[Any], ModelResolver, list[dict[str, Any]]]:
    return run_local_server_turn(root, server.base_url, server.raw_requests, monkeypatch,
                                 **options)  # fmt: skip


@pytest.mark.process  # a fresh interpreter: what it imports is the point
def test_run_start_up_does_not_load_the_engine() -> None:
    """What a run imports before its first request has neither pydantic-ai nor the OpenAI
    SDK (they cost about 1.2 s of CPU; they load while the model answers)."""
    code = (
        "import sys, personae.cli.run, personae.api.team, personae.team.session, "
        "personae.team.plan_request, personae.models.resolve, personae.models.early\n"
        "print(sorted(m for m in ('pydantic_ai', 'openai', 'httpx2') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)  # fmt: skip
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


@pytest.mark.parametrize("kind", ["llama-cpp-python", "vllm"])
def test_the_plan_request_is_sent_early_and_answered_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    root = team_project(tmp_path / "proj")
    with _server(tmp_path, kind) as server:
        outcome, resolver, requests = _run(root, server, monkeypatch)
    assert outcome.status == "done", outcome.answer
    early = resolver.early
    assert early is not None and early.state == "claimed"
    # one request per scripted answer: the plan was not sent a second time
    assert len(requests) == len(STEPS)
    assert requests[0]["messages"][0]["content"].startswith("personae-role: manager")
    assert early.body == requests[0]
    assert requests[0]["stream"] is True and "response_format" in requests[0]
    plans = [e for e in outcome.events if e.kind.value == "plan"]
    assert plans and plans[0].data["subtasks"][0].description == "Read config.yaml"


def test_no_early_request_when_a_hook_may_veto_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = team_project(tmp_path / "proj")
    with _server(tmp_path, "llama-cpp-python") as server:
        outcome, resolver, requests = _run(root, server, monkeypatch, hooks=[RunHooks()])
    assert outcome.status == "done", outcome.answer
    assert resolver.early is None
    assert len(requests) == len(STEPS)


def test_a_request_that_differs_is_sent_as_usual_and_the_early_one_hung_up(
    tmp_path: Path,
) -> None:
    """The early request answers only the identical request; any other goes out as
    usual, and the early one's connection is closed (a streaming server stops)."""
    steps = [{"text": "early answer"}, {"text": "usual answer"}]
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump({"steps": steps, "server": IMITATION}))
    sent = {"model": "smollm2", "messages": [{"role": "user", "content": "first"}],
            "max_tokens": 16}  # fmt: skip
    other = {**sent, "messages": [{"role": "user", "content": "second"}]}

    async def go(server: ScriptedServer) -> tuple[EarlyRequest | None, str]:
        early = EarlyRequest.send(server.base_url, sent, key=None)
        assert early is not None
        transport = EarlyTransport(early, httpx2.AsyncHTTPTransport())
        async with httpx2.AsyncClient(transport=transport) as client:
            reply = await client.post(f"{server.base_url}/chat/completions", json=other)
        return early, reply.json()["choices"][0]["message"]["content"]

    with ScriptedServer(path) as server:
        early, text = run_async(go(server))
        routes = [route for route, _ in server.raw_requests]
    assert early is not None and early.state == "discarded"
    assert text in ("early answer", "usual answer")  # the server answers in its order
    assert routes.count("/v1/chat/completions") == 2
    assert [b["messages"][0]["content"] for _, b in server.raw_requests] == ["first", "second"]


def test_an_identical_request_gets_the_early_answer(tmp_path: Path) -> None:
    path = tmp_path / "one.yaml"
    path.write_text(yaml.safe_dump({"steps": [{"text": "the early answer"}], "server": IMITATION}))
    sent = {"model": "smollm2", "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 16}  # fmt: skip

    async def go(server: ScriptedServer) -> tuple[EarlyRequest, str]:
        early = EarlyRequest.send(server.base_url, sent, key=None)
        assert early is not None
        transport = EarlyTransport(early, httpx2.AsyncHTTPTransport())
        async with httpx2.AsyncClient(transport=transport) as client:
            # the same JSON, keys in another order: the same request
            body = json.dumps(dict(reversed(list(sent.items())))).encode()
            reply = await client.post(f"{server.base_url}/chat/completions", content=body,
                                      headers={"Content-Type": "application/json"})  # fmt: skip
        return early, reply.json()["choices"][0]["message"]["content"]

    with ScriptedServer(path) as server:
        early, text = run_async(go(server))
        count = len(server.raw_requests)
    assert early.state == "claimed" and text == "the early answer"
    assert count == 1


def test_a_resolver_whose_models_answer_another_way_sends_nothing_early(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replay's resolver answers from the record first: nothing may reach the server
    for a call the record answers."""

    class Wrapping(ModelResolver):
        def model(self, persona_model: str | None = None) -> Any:
            return super().model(persona_model)

    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 16}

    async def wrapped() -> EarlyRequest | None:
        return Wrapping(default="openai:smollm2").send_early(body)

    async def plain() -> EarlyRequest | None:
        resolver = ModelResolver(default="openai:smollm2")
        early = resolver.send_early(body)
        resolver.close()
        return early

    with _server(tmp_path, "llama-cpp-python") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        assert run_async(wrapped()) is None
        time.sleep(0.5)  # a request sent would have arrived by now
        assert server.raw_requests == []
        early = run_async(plain())  # the plain resolver does send it (then hangs up)
    assert early is not None and early.state == "discarded"
