"""The scripted OpenAI-compatible server over real loopback HTTP, and scenario files."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.models import override_allow_model_requests
from pydantic_ai.toolsets import FunctionToolset

from _helpers import run_async
from personae.models import Scenario, ScenarioError, ScriptedServer, load_scenario
from personae.tokens.exact import exact_counter

SCENARIO = {
    "steps": [
        {"when": {"role": "manager"}, "output": {"items": ["a", "b"]}},
        {"tool_calls": [{"name": "add", "args": {"a": 2, "b": 3}}]},
        {"when": {"last_contains": "5"}, "text": "the sum is 5"},
    ],
    "rules": [{"when": {"contains": "ping"}, "text": "pong"}],
}


class Items(BaseModel):
    items: list[str]


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_pydantic_ai_runs_through_the_real_openai_provider() -> None:
    with ScriptedServer(Scenario.model_validate(SCENARIO)) as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        with override_allow_model_requests(True):
            planner = Agent(
                server.model(), output_type=Items, instructions="personae-role: manager"
            )
            assert run_async(planner.run("plan")).output == Items(items=["a", "b"])
            worker = Agent(server.model(), toolsets=[FunctionToolset([add])])
            result = run_async(worker.run("add them"))
        assert result.output == "the sum is 5"
        assert server.remaining_steps == 0
        # The tool result travelled back to the server as an OpenAI tool message.
        last = server.requests[-1]["messages"][-1]
        assert last["role"] == "tool" and last["content"] == "5"
        assert server.model().model_name == "scripted"


def test_streaming_and_plain_http() -> None:
    with ScriptedServer(Scenario.model_validate(SCENARIO)) as server:
        url = f"{server.base_url}/chat/completions"
        body = {"model": "scripted", "messages": [{"role": "user", "content": "ping"}]}
        plain = httpx.post(url, json=body).json()
        assert plain["choices"][0]["message"]["content"] == "pong"
        assert plain["model"] == "scripted" and plain["usage"]["prompt_tokens"] > 0
        with httpx.stream("POST", url, json={**body, "stream": True}) as response:
            assert response.headers["content-type"] == "text/event-stream"
            lines = [x for x in response.iter_lines() if x.startswith("data: ")]
        assert lines[-1] == "data: [DONE]"
        chunks = [json.loads(x[6:]) for x in lines[:-1]]
        assert chunks[0]["choices"][0]["delta"]["content"] == "pong"
        with override_allow_model_requests(True):
            agent = Agent(server.model())

            async def stream() -> str:
                async with agent.run_stream("ping") as run:
                    return await run.get_output()

            assert run_async(stream()) == "pong"


def test_errors_and_exhaustion() -> None:
    scenario = Scenario.model_validate(
        {"steps": [{"error": {"status": 429, "message": "slow down"}}, {"text": "ok"}]}
    )
    with ScriptedServer(scenario) as server:
        url = f"{server.base_url}/chat/completions"
        body = {"messages": [{"role": "user", "content": "x"}]}
        first = httpx.post(url, json=body)
        assert first.status_code == 429 and first.json()["error"]["message"] == "slow down"
        assert httpx.post(url, json=body).json()["choices"][0]["message"]["content"] == "ok"
        over = httpx.post(url, json=body)
        assert over.status_code == 500 and "no answer" in over.json()["error"]["message"]
        assert httpx.post(f"{server.base_url}/embeddings", json=body).status_code == 404
        with override_allow_model_requests(True), pytest.raises(ModelHTTPError):
            run_async(Agent(server.model()).run("x"))


def test_scenario_files(tmp_path: Path) -> None:
    good = tmp_path / "s.yaml"
    good.write_text("steps:\n  - text: hi\n")
    assert load_scenario(good).steps[0].text == "hi"
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("steps:\n  - text: [unclosed\n")
    with pytest.raises(ScenarioError) as err:
        load_scenario(bad_yaml)
    assert str(err.value).startswith(f"{bad_yaml}:")
    two = tmp_path / "two.yaml"
    two.write_text("steps:\n  - text: hi\n    output: {a: 1}\n")
    with pytest.raises(ScenarioError, match="exactly one of"):
        load_scenario(two)
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("steps:\n  - txt: hi\n")
    with pytest.raises(ScenarioError, match="steps"):
        load_scenario(unknown)
    with pytest.raises(ScenarioError, match="not found"):
        load_scenario(tmp_path / "none.yaml")


def test_bundled_demo_scenario_is_valid() -> None:
    from importlib import resources

    path = Path(str(resources.files("personae.examples") / "demo" / "scenario.yaml"))
    scenario = load_scenario(path)
    assert len(scenario.steps) >= 10
    assert "scripted" in path.read_text().lower()


def test_usage_is_a_real_tokenizers_count_of_what_the_server_received() -> None:
    """The reported usage counts the request as a real OpenAI server does (o200k tokens of
    each message's role and text, tool calls and tool definitions, 3 framing tokens a
    message and 3 to start the answer), not characters over four."""
    o200k = exact_counter("o200k_base")
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    function = {"name": "add", "description": "Add two numbers.", "parameters": schema}
    tools = [{"type": "function", "function": function}]
    messages = [
        {"role": "system", "content": "personae-role: worker"},
        {"role": "user", "content": "ping " + "数据 " * 50},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "add", "arguments": '{"a": 1}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "5"},
    ]  # fmt: skip
    texts = ["system", "personae-role: worker", "user", messages[1]["content"], "assistant",
             "add", '{"a": 1}', "tool", "5", json.dumps(function, sort_keys=True)]  # fmt: skip
    want = 3 + 3 * len(messages) + sum(o200k.count(t) for t in texts)
    with ScriptedServer(Scenario.model_validate(SCENARIO)) as server:
        url = f"{server.base_url}/chat/completions"
        got = httpx.post(url, json={"model": "scripted", "messages": messages, "tools": tools})
        usage = got.json()["usage"]
        answer = got.json()["choices"][0]["message"]
    assert usage["prompt_tokens"] == want
    chars = len(json.dumps(messages)) // 4  # what the server used to report
    assert usage["prompt_tokens"] != chars
    assert usage["completion_tokens"] == sum(
        o200k.count(t) for t in [answer.get("content") or ""] if t
    ) + sum(o200k.count(c["function"]["name"]) + o200k.count(c["function"]["arguments"])
            for c in answer.get("tool_calls") or [])  # fmt: skip
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
