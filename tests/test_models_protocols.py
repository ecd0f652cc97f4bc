"""One scenario file served over OpenAI chat, OpenAI Responses and Anthropic Messages.

Each protocol goes through a real client over loopback HTTP: pydantic-ai's
OpenAI chat and Responses models, and personae's own ``anthropic:`` provider
path (pydantic-ai's Anthropic model resolved by ``ModelResolver``).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from pydantic_ai import Agent
from pydantic_ai.models import override_allow_model_requests
from pydantic_ai.toolsets import FunctionToolset

from _helpers import run_async
from personae.models import ModelResolver, Scenario, ScriptedServer

SCENARIO = Scenario.model_validate(
    {
        "steps": [
            {"when": {"tool": "add"}, "tool_calls": [{"name": "add", "args": {"a": 2, "b": 3}}]},
            {"when": {"last_contains": "5"}, "text": "the sum is 5"},
        ],
    }
)


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _run(model: object) -> str:
    with override_allow_model_requests(True):
        agent = Agent(model, toolsets=[FunctionToolset([add])])
        return str(run_async(agent.run("add 2 and 3")).output)


def _tool_result_sent(server: ScriptedServer) -> str:
    last = server.requests[-1]["messages"][-1]
    assert last["role"] == "tool"
    return str(last["content"])


@pytest.mark.parametrize("suffix", ["", "/v1", "/v1/"], ids=["root", "v1", "v1-slash"])
def test_personae_anthropic_provider_path_runs_a_tool_call(
    monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    with ScriptedServer(SCENARIO) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.root_url + suffix)  # as doctor reads it
        monkeypatch.setenv("ANTHROPIC_API_KEY", "scripted-no-key")
        resolver = ModelResolver(default="anthropic:scripted")
        assert _run(resolver.model()) == "the sum is 5"
        assert server.remaining_steps == 0
        routes = [route for route, _ in server.raw_requests]
        assert routes == ["/v1/messages", "/v1/messages"]
        # The tool result went back as an Anthropic tool_result block.
        second = server.raw_requests[1][1]
        blocks = second["messages"][-1]["content"]
        assert any(b["type"] == "tool_result" and "5" in json.dumps(b) for b in blocks)
        assert _tool_result_sent(server) == "5"


def test_anthropic_streaming_tool_use_blocks() -> None:
    with ScriptedServer(SCENARIO) as server:
        body = {
            "model": "claude-x",
            "max_tokens": 100,
            "stream": True,
            "tools": [{"name": "add", "input_schema": {"type": "object"}}],
            "messages": [{"role": "user", "content": "add"}],
        }
        with httpx.stream("POST", f"{server.root_url}/v1/messages", json=body) as response:
            text = response.read().decode()
        events = [line[7:] for line in text.splitlines() if line.startswith("event: ")]
        assert events[0] == "message_start" and events[-1] == "message_stop"
        data = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
        start = next(d for d in data if d["type"] == "content_block_start")
        assert start["content_block"]["type"] == "tool_use"
        assert start["content_block"]["name"] == "add"
        delta = next(d for d in data if d["type"] == "content_block_delta")
        assert json.loads(delta["delta"]["partial_json"]) == {"a": 2, "b": 3}
        stop = next(d for d in data if d["type"] == "message_delta")
        assert stop["delta"]["stop_reason"] == "tool_use"
        counted = httpx.post(f"{server.root_url}/v1/messages/count_tokens", json=body).json()
        assert counted["input_tokens"] > 0


def test_anthropic_errors_use_the_anthropic_shape() -> None:
    with ScriptedServer(Scenario.model_validate({"steps": [{"text": "x"}]})) as server:
        body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "a"}]}
        url = f"{server.root_url}/v1/messages"
        assert httpx.post(url, json=body).json()["content"] == [{"type": "text", "text": "x"}]
        exhausted = httpx.post(url, json=body)
        assert exhausted.status_code == 500
        assert exhausted.json()["type"] == "error"
        assert "no answer" in exhausted.json()["error"]["message"]


def test_openai_responses_through_pydantic_ai() -> None:
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    with ScriptedServer(SCENARIO) as server:
        provider = OpenAIProvider(base_url=server.base_url, api_key="scripted-no-key")
        assert _run(OpenAIResponsesModel("scripted", provider=provider)) == "the sum is 5"
        assert [route for route, _ in server.raw_requests] == ["/v1/responses"] * 2
        second = server.raw_requests[1][1]
        outputs = [i for i in second["input"] if i.get("type") == "function_call_output"]
        assert outputs and outputs[0]["output"] == "5"
        assert _tool_result_sent(server) == "5"


def test_responses_stream_and_custom_tools() -> None:
    scenario = Scenario.model_validate(
        {"steps": [{"tool_calls": [{"name": "apply_patch", "args": {"input": "*** Begin"}}]}]}
    )
    with ScriptedServer(scenario) as server:
        body = {
            "model": "scripted",
            "stream": True,
            "instructions": "be brief",
            "tools": [{"type": "custom", "name": "apply_patch"}],
            "input": [
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "hi"}],
                }
            ],
        }
        with httpx.stream("POST", f"{server.base_url}/responses", json=body) as response:
            text = response.read().decode()
        data = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
        assert data[0]["type"] == "response.created"
        assert data[-1]["type"] == "response.completed"
        done = [d["item"] for d in data if d["type"] == "response.output_item.done"]
        assert done[0]["type"] == "custom_tool_call" and done[0]["input"] == "*** Begin"
        assert server.requests[0]["messages"][0] == {"role": "system", "content": "be brief"}


@pytest.mark.process
def test_serving_a_scenario_file_by_hand(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("steps:\n  - text: hello\n", encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "personae.models", str(scenario)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("scripted server: http://127.0.0.1:")
        root = first.split("(Anthropic: ")[1].rstrip(")\n")
        body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
        reply = httpx.post(f"{root}/v1/messages", json=body, timeout=10).json()
        assert reply["content"] == [{"type": "text", "text": "hello"}]
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=10)
        assert proc.returncode == 0
        assert "answered: hello" in out and "1 requests answered, 0 steps left" in out
    finally:
        proc.kill()
        proc.wait()
    bad = subprocess.run(
        [sys.executable, "-m", "personae.models", str(tmp_path / "missing.yaml")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert bad.returncode == 1 and bad.stderr.startswith("personae: error:")
    assert "Traceback" not in bad.stderr
