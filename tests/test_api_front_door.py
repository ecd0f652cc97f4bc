"""What users of pydantic-ai's ``Agent``, the Agents SDK and LangChain's ``create_agent`` expect
of ``personae.Team``: function tools, usage caps, and the rest of the front door.

Every run goes over loopback HTTP to the scripted replay server (``scripted:`` specs)
through pydantic-ai's real OpenAI provider code and is stored in a real SQLite store.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai.models import override_allow_model_requests

from _helpers import (
    attempt,
    dev_project,
    one_subtask,
    read_config_scenario,
    requests_with,
    tool,
    verdict,
)
from personae import Limits, PersonaeError, Team, UsageError, function_tool
from personae.team.events import RunWarning, ToolCalled
from personae.team.hooks import ModelCall, ModelReply, RunHooks, ToolOutcome, ToolUse, Veto

TOOLED_PERSONA = """---
name: dev
description: Works with the weather tools.
tools: [forecast, read_file]
---
You are dev.
"""

NARROW_PERSONA = """---
name: narrow
description: Reads files only.
tools: [read_file]
---
You are narrow.
"""


class Place(BaseModel):
    """Where the forecast is for."""

    city: str
    country: str = "NL"


def forecast(place: Place, days: int = 2) -> dict[str, Any]:
    """The weather forecast for a place.

    Args:
        place: The city and its country.
        days: How many days ahead.
    """
    return {"city": place.city, "days": days, "sky": "sunny"}


async def alerts(city: str) -> str:
    """Weather alerts for a city."""
    return f"no alerts for {city}"


@pytest.fixture(autouse=True)
def scripted_requests() -> Any:
    with override_allow_model_requests(True):
        yield


def test_a_function_tool_has_the_schema_and_description_of_its_signature() -> None:
    made = function_tool(forecast)
    assert made.name == "forecast"
    assert made.description == "The weather forecast for a place."
    schema = made.parameters
    assert schema["required"] == ["place"]
    assert schema["properties"]["days"] == {
        "default": 2, "description": "How many days ahead.", "title": "Days", "type": "integer",
    }  # fmt: skip
    assert schema["properties"]["place"]["description"] == "The city and its country."
    assert schema["additionalProperties"] is False


@pytest.mark.parametrize(
    ("tools", "needle"),
    [
        ([lambda x: x], "needs a type annotation"),
        ([function_tool(alerts), alerts], "two tools are named 'alerts'"),
        ([function_tool(alerts, name="read_file")], "name of a built-in or MCP tool"),
        ([function_tool(alerts, name="Bash")], "name of a built-in or MCP tool"),
        (alerts, "must be a list"),
    ],
)
def test_a_bad_tool_is_refused_when_the_team_is_built(
    tmp_path: Path, tools: Any, needle: str
) -> None:
    with pytest.raises(UsageError, match=needle):
        Team(root=tmp_path, model="scripted:x.yaml", tools=tools)


def _tool_scenario(*bad_days: Any) -> dict[str, Any]:
    """Each bad ``days`` is an attempt the code rejects (a tool failed); then a good one."""
    bad = [attempt(tool("forecast", place={"city": "Utrecht"}, days=d), "?") for d in bad_days]
    good = attempt(tool("forecast", place={"city": "Utrecht"}, days=3), "Utrecht: sunny",
                   verdict(True))  # fmt: skip
    steps = one_subtask("Get the forecast", *bad, good, answer="Sunny in Utrecht.")
    return {"description": "function tool", "steps": steps}


def test_the_worker_calls_a_function_tool_with_validated_typed_arguments(tmp_path: Path) -> None:
    seen: list[tuple[Place, int]] = []

    def spy(place: Place, days: int = 2) -> dict[str, Any]:
        seen.append((place, days))
        return forecast(place, days)

    root = dev_project(tmp_path, {"s": _tool_scenario()}, persona=TOOLED_PERSONA)
    team = Team.from_project(
        root, model=f"scripted:{tmp_path / 's.yaml'}", persona="dev",
        tools=[function_tool(spy, name="forecast"), alerts], include_git_log=False,
    )  # fmt: skip
    result = team.run("Weather in Utrecht?")
    assert result.status == "done" and result.answer == "Sunny in Utrecht."
    assert seen == [(Place(city="Utrecht"), 3)]
    [call] = [e for e in result.events if isinstance(e, ToolCalled)]
    assert call.tool == "forecast" and call.ok
    assert json.loads(call.result) == {"city": "Utrecht", "days": 3, "sky": "sunny"}
    assert result.usage.tool_calls == 1


def test_bad_arguments_reach_the_model_as_a_tool_error_not_the_function(tmp_path: Path) -> None:
    calls: list[int] = []

    def spy(place: Place, days: int = 2) -> str:
        calls.append(days)
        return "sunny"

    root = dev_project(tmp_path, {"s": _tool_scenario("many")}, persona=TOOLED_PERSONA)
    team = Team.from_project(
        root, model=f"scripted:{tmp_path / 's.yaml'}", persona="dev",
        tools=[function_tool(spy, name="forecast")], include_git_log=False,
    )  # fmt: skip
    result = team.run("Weather?")
    assert calls == [3]  # the call with days="many" never reached the function
    bad, good = [e for e in result.events if isinstance(e, ToolCalled)]
    assert not bad.ok and "days" in bad.result and "integer" in bad.result
    assert good.ok and result.status == "done"


def test_a_persona_without_the_tool_in_its_list_is_not_offered_it(tmp_path: Path) -> None:
    from personae.models.scripted import ScriptedServer

    refused = attempt(tool("forecast", place={"city": "Utrecht"}), "?")
    fallback = attempt(tool("read_file", path="config.yaml"), "port 8081", verdict(True))
    steps = one_subtask("Get the forecast", refused, fallback, answer="No forecast.")
    root = dev_project(tmp_path, {"s": {"steps": steps}}, persona=NARROW_PERSONA)
    ran: list[str] = []

    def spy(place: Place, days: int = 2) -> str:
        ran.append(place.city)
        return "sunny"

    server = ScriptedServer(tmp_path / "s.yaml").start()
    try:
        from personae.models import ModelResolver
        from personae.team.session import RunOptions, run_turn

        options = RunOptions(root=root, persona="narrow", include_git_log=False,
                             tools=[function_tool(spy, name="forecast")])  # fmt: skip
        resolver = ModelResolver.using(server.model(), "scripted")
        from _helpers import run_async

        outcome = run_async(run_turn("Weather?", options, resolver=resolver))
        offered = [
            t["function"]["name"]
            for r in requests_with(server.player, "Worker")
            for t in r.get("tools", [])
        ]
    finally:
        server.stop()
    assert ran == []
    assert "read_file" in offered and "forecast" not in offered
    refused = [e for e in outcome.events if isinstance(e, ToolCalled) and e.tool == "forecast"]
    assert refused and not refused[0].ok


def test_the_tool_call_cap_refuses_the_call_past_it_and_stops_the_run(tmp_path: Path) -> None:
    ran: list[str] = []

    def spy(place: Place, days: int = 2) -> str:
        ran.append(place.city)
        return "sunny"

    root = dev_project(tmp_path, {"s": _tool_scenario()}, persona=TOOLED_PERSONA)
    team = Team.from_project(
        root, model=f"scripted:{tmp_path / 's.yaml'}", persona="dev",
        tools=[function_tool(spy, name="forecast")], include_git_log=False,
    )  # fmt: skip
    result = team.run("Weather?", limits=Limits(max_tool_calls=0))
    assert ran == [] and result.status == "partial"
    assert result.usage.tool_calls == 0
    assert any("tool-call cap of 0" in w for w in result.warnings)
    caps = [e for e in result.events if isinstance(e, RunWarning) and e.action == "usage_cap"]
    assert caps and "tool-call cap" in caps[0].message


def test_the_token_cap_stops_the_run_once_the_tokens_are_used(tmp_path: Path) -> None:
    root = dev_project(tmp_path, {"s": _tool_scenario()}, persona=TOOLED_PERSONA)
    team = Team.from_project(
        root, model=f"scripted:{tmp_path / 's.yaml'}", persona="dev",
        tools=[forecast], include_git_log=False,
    )  # fmt: skip
    result = team.run("Weather?", limits=Limits(max_tokens=10))
    assert result.status == "partial" and result.usage.requests == 1
    assert result.usage.input_tokens + result.usage.output_tokens >= 10
    assert any("token cap of 10" in w for w in result.warnings)


@pytest.mark.parametrize(
    ("limits", "field"),
    [(Limits(max_tokens=0), "max_tokens"), (Limits(max_tool_calls=-1), "max_tool_calls"),
     (Limits(max_requests=0), "max_requests")],
)  # fmt: skip
def test_a_cap_below_its_minimum_is_refused_naming_it(
    tmp_path: Path, limits: Limits, field: str
) -> None:
    team = Team(root=tmp_path, model="scripted:x.yaml")
    with pytest.raises(UsageError, match=field):
        team.run("x", limits=limits)


def _desk(tmp_path: Path, scenario: dict[str, Any], **team: Any) -> Team:
    root = dev_project(tmp_path, {"s": scenario}, persona=TOOLED_PERSONA)
    return Team.from_project(
        root, model=f"scripted:{tmp_path / 's.yaml'}", persona="dev", include_git_log=False,
        **team,
    )  # fmt: skip


class _Refuse(RunHooks):
    """Vetoes what it is told to (of the tools, only forecast); remembers what it was asked."""

    def __init__(self, **refuse: str) -> None:
        self.refuse = refuse
        self.asked: list[str] = []

    def before_model(self, call: ModelCall) -> Veto | None:
        self.asked.append(f"before_model {call.role}")
        return Veto(self.refuse["before_model"]) if "before_model" in self.refuse else None

    async def after_model(self, call: ModelCall, reply: ModelReply) -> Veto | None:
        self.asked.append(f"after_model {call.role}")
        return Veto(self.refuse["after_model"]) if "after_model" in self.refuse else None

    def before_tool(self, call: ToolUse) -> Veto | None:
        self.asked.append(f"before_tool {call.tool} {dict(call.args)}")
        refuse = "before_tool" in self.refuse and call.tool == "forecast"
        return Veto(self.refuse["before_tool"]) if refuse else None

    def after_tool(self, call: ToolUse, outcome: ToolOutcome) -> Veto | None:
        self.asked.append(f"after_tool {call.tool} {outcome.ok}")
        refuse = "after_tool" in self.refuse and call.tool == "forecast"
        return Veto(self.refuse["after_tool"]) if refuse else None


def _forecast_then_read() -> dict[str, Any]:
    """The worker calls forecast (then the code rejects the attempt), then reads the config."""
    return {"steps": one_subtask(
        "Get the forecast",
        attempt(tool("forecast", place={"city": "Utrecht"}), "refused"),
        attempt(tool("read_file", path="config.yaml"), "port 8081", verdict(True)),
        answer="No forecast today.",
    )}  # fmt: skip


def _vetoes(result: Any) -> list[RunWarning]:
    return [e for e in result.events if isinstance(e, RunWarning) and e.action == "vetoed"]


def test_hooks_see_every_model_and_tool_call_in_order(tmp_path: Path) -> None:
    hook = _Refuse()
    result = _desk(tmp_path, _tool_scenario(), tools=[forecast], hooks=[hook]).run("Weather?")
    assert result.status == "done" and _vetoes(result) == []
    assert hook.asked == [
        "before_model manager", "after_model manager",
        "before_model worker", "after_model worker",
        "before_tool forecast {'days': 3, 'place': {'city': 'Utrecht'}}",
        "after_tool forecast True",
        "before_model worker", "after_model worker",
        "before_model validator", "after_model validator",
        "before_model manager", "after_model manager",
    ]  # fmt: skip


def test_a_tool_vetoed_before_it_runs_does_not_run_and_the_run_records_it(
    tmp_path: Path,
) -> None:
    ran: list[int] = []

    def spy(place: Place, days: int = 2) -> str:
        ran.append(days)
        return "sunny"

    scenario = _forecast_then_read()
    hook = _Refuse(before_tool="no forecasts on Fridays")
    team = _desk(tmp_path, scenario, tools=[function_tool(spy, name="forecast")], hooks=[hook])
    result = team.run("Weather?")
    assert ran == []
    [veto] = _vetoes(result)
    assert veto.data["call"] == "tool" and veto.data["tool"] == "forecast"
    assert veto.data["reason"] == "no forecasts on Fridays" and veto.data["when"] == "before"
    calls = [e for e in result.events if isinstance(e, ToolCalled)]
    assert [(c.tool, c.ok) for c in calls] == [("forecast", False), ("read_file", True)]
    assert "refused by a hook: no forecasts on Fridays" in calls[0].result


def test_a_tool_result_vetoed_after_the_call_is_withheld_from_the_run(tmp_path: Path) -> None:
    from personae.store.db import Store

    scenario = {"steps": one_subtask(
        "Get the forecast",
        attempt(tool("forecast", place={"city": "Utrecht"}), "withheld"),
        attempt(tool("forecast", place={"city": "Delft"}), "also withheld"),
        attempt(tool("forecast", place={"city": "Leiden"}), "and again"),
        answer=None,
    )}  # fmt: skip
    hook = _Refuse(after_tool="the forecast is confidential")
    team = _desk(tmp_path, scenario, tools=[forecast], hooks=[hook])
    result = team.run("Weather?", limits=Limits(max_retries=2))
    calls = [e for e in result.events if isinstance(e, ToolCalled)]
    assert calls and all(not c.ok and "withheld by a hook" in c.result for c in calls)
    assert all(v.data["when"] == "after" for v in _vetoes(result))
    with Store(team.root / ".personae" / "state.db") as store:
        sent = " ".join(r[0] for r in store.conn.execute("SELECT context_text FROM model_calls"))
        told = json.dumps([e.to_json_dict() for e in result.events])
    assert "sunny" not in sent and "sunny" not in told  # the result never reached anyone


@pytest.mark.parametrize("when", ["before_model", "after_model"])
def test_a_vetoed_model_call_stops_the_run_and_the_run_says_why(tmp_path: Path, when: str) -> None:
    class WorkerOnce(_Refuse):
        def __init__(self) -> None:
            super().__init__()

        def before_model(self, call: ModelCall) -> Veto | None:
            super().before_model(call)
            if when == "before_model" and call.role == "worker":
                return Veto("workers need approval")
            return None

        async def after_model(self, call: ModelCall, reply: ModelReply) -> Veto | None:
            await super().after_model(call, reply)
            if when == "after_model" and call.role == "worker":
                return Veto("answer failed the content filter")
            return None

    hook = WorkerOnce()
    result = _desk(tmp_path, _tool_scenario(), tools=[forecast], hooks=[hook]).run("Weather?")
    assert result.status == "partial"
    [veto] = _vetoes(result)
    assert veto.data["call"] == "model" and veto.data["role"] == "worker"
    assert veto.data["when"] == when.split("_", maxsplit=1)[0]
    assert [s.status for s in result.subtasks] == ["skipped"]
    assert "vetoed by a hook" in result.subtasks[0].reason
    # nothing after the veto: no tool ran, no validator or synthesis call was made
    assert not any(a.startswith(("before_tool", "before_model validator")) for a in hook.asked)
    assert hook.asked.count("before_model manager") == 1
    assert result.usage.requests == (1 if when == "before_model" else 2)


def test_a_hook_that_returns_something_else_fails_the_run_clearly(tmp_path: Path) -> None:
    class Wrong(RunHooks):
        def before_tool(self, call: ToolUse) -> Any:
            return "no"

    with pytest.raises(PersonaeError, match="a hook returned str; return a Veto or None"):
        _desk(tmp_path, _tool_scenario(), tools=[forecast], hooks=[Wrong()]).run("Weather?")


def test_spans_start_and_end_while_the_run_runs(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    finished_at_tool: list[list[str]] = []

    class Probe(RunHooks):
        def before_tool(self, call: ToolUse) -> Veto | None:
            finished_at_tool.append([s.name for s in exporter.get_finished_spans()])
            return None

    team = _desk(tmp_path, _tool_scenario(), tools=[forecast], hooks=[Probe()],
                 instrument=provider)  # fmt: skip
    result = team.run("Weather?")
    assert result.status == "done"
    # While the tool ran, the plan's and the worker's model calls were already exported,
    # and the run and its subtask were still open.
    [seen] = finished_at_tool
    assert seen == ["chat " + _model(result), "chat " + _model(result)]
    spans = exporter.get_finished_spans()
    by_name = {s.name: s for s in spans}
    names = [s.name for s in spans]
    assert names[-1] == "invoke_agent dev" and names[-2] == "subtask 1"
    root, subtask, tool_span = by_name["invoke_agent dev"], by_name["subtask 1"], by_name[
        "execute_tool forecast"]  # fmt: skip
    assert root.parent is None and subtask.parent is not None
    assert subtask.parent.span_id == root.context.span_id
    assert tool_span.parent is not None and tool_span.parent.span_id == subtask.context.span_id
    assert tool_span.attributes is not None and tool_span.attributes["personae.tool.ok"] is True
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == result.usage.requests == 5
    roles = [s.attributes["personae.role"] for s in chats if s.attributes]
    assert roles == ["manager", "worker", "worker", "validator", "manager"]
    assert all(s.attributes and s.attributes["gen_ai.usage.input_tokens"] > 0 for s in chats)
    assert root.attributes is not None and root.attributes["personae.run.id"] == result.run_id
    assert all(s.context.trace_id == root.context.trace_id for s in spans)
    assert all(s.end_time is not None and s.start_time is not None for s in spans)


def test_a_vetoed_call_ends_its_span_with_an_error(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import StatusCode

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    scenario = _forecast_then_read()
    team = _desk(tmp_path, scenario, tools=[forecast], instrument=provider,
                 hooks=[_Refuse(before_tool="not today")])  # fmt: skip
    team.run("Weather?")
    tools = [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")]
    assert [s.name for s in tools] == ["execute_tool forecast", "execute_tool read_file"]
    assert [s.status.status_code for s in tools] == [StatusCode.ERROR, StatusCode.UNSET]
    assert tools[0].status.description == "vetoed: not today"


def _model(result: Any) -> str:
    return str(result.model).partition(":")[2]


class Forecast(BaseModel):
    """The final answer as a typed object."""

    city: str
    sky: str
    days: int


def _typed_scenario(*answers: Any) -> dict[str, Any]:
    """The forecast subtask validated, then each of ``answers`` as the manager's final
    structured output (one per synthesis try)."""
    steps = _tool_scenario()["steps"][:-1]
    steps += [{"when": {"role": "manager"}, "output": a} for a in answers]
    return {"steps": steps}


def test_the_answer_comes_back_typed_as_the_output_type(tmp_path: Path) -> None:
    answer = {"city": "Utrecht", "sky": "sunny", "days": 3}
    team = _desk(tmp_path, _typed_scenario(answer), tools=[forecast])
    result = team.run("Weather?", output_type=Forecast)
    assert result.status == "done"
    assert result.output == Forecast(city="Utrecht", sky="sunny", days=3)
    assert isinstance(result.output, Forecast)
    assert json.loads(result.answer) == answer
    plain = _desk(tmp_path / "plain", _tool_scenario(), tools=[forecast]).run("Weather?")
    assert plain.output == plain.answer == "Sunny in Utrecht."


def test_any_type_pydantic_validates_is_an_output_type(tmp_path: Path) -> None:
    team = _desk(tmp_path, _typed_scenario({"answer": ["sunny", "dry"]}), tools=[forecast])
    result = team.run("Weather?", output_type=list[str])
    assert result.output == ["sunny", "dry"]


def test_an_answer_that_does_not_parse_is_a_clear_error(tmp_path: Path) -> None:
    from personae import AnswerTypeError

    bad = {"city": "Utrecht", "sky": "sunny", "days": "many"}
    scenario = _typed_scenario()  # the manager answers badly however often it is asked
    scenario["rules"] = [{"when": {"role": "manager"}, "output": bad}]
    team = _desk(tmp_path, scenario, tools=[forecast])
    with pytest.raises(AnswerTypeError) as caught:
        team.run("Weather?", output_type=Forecast)
    message = str(caught.value)
    assert message.startswith("the final answer did not parse as Forecast:")
    assert "days" in message and "\n" not in message
    run_id = caught.value.data["run_id"]
    from personae.store.db import Store

    with Store(team.root / ".personae" / "state.db") as store:
        (status,) = store.conn.execute("SELECT status FROM runs WHERE id=?", (run_id,)).fetchone()
    assert status == "failed"


def test_a_type_pydantic_cannot_validate_is_refused_before_the_run(tmp_path: Path) -> None:
    team = _desk(tmp_path, _tool_scenario(), tools=[forecast])
    with pytest.raises(UsageError, match="output_type"):
        team.run("Weather?", output_type=Team)
    assert not (team.root / ".personae" / "state.db").exists()


def _server_routes(server: Any) -> list[str]:
    return [route for route, _ in server.raw_requests]


def test_a_pydantic_ai_model_object_answers_every_role(tmp_path: Path) -> None:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from personae.models.scripted import ScriptedServer

    team_root = dev_project(tmp_path, {"s": _tool_scenario()}, persona=TOOLED_PERSONA)
    with ScriptedServer(tmp_path / "s.yaml") as server:
        model = OpenAIChatModel(
            "gpt-4o", provider=OpenAIProvider(base_url=server.base_url, api_key="k")
        )
        team = Team.from_project(team_root, model=model, persona="dev", tools=[forecast],
                                 include_git_log=False)  # fmt: skip
        result = team.run("Weather?")
        routes = _server_routes(server)
    assert result.status == "done" and result.model == "openai:gpt-4o"
    assert routes == ["/v1/chat/completions"] * 5


@pytest.mark.parametrize("kind", ["openai", "anthropic", "base_url"])
def test_a_client_or_base_url_carries_the_named_model(tmp_path: Path, kind: str) -> None:
    from anthropic import AsyncAnthropic
    from openai import AsyncOpenAI

    from personae.models.scripted import ScriptedServer

    team_root = dev_project(tmp_path, {"s": _tool_scenario()}, persona=TOOLED_PERSONA)
    with ScriptedServer(tmp_path / "s.yaml") as server:
        given: dict[str, Any] = {
            "openai": {"client": AsyncOpenAI(base_url=server.base_url, api_key="k")},
            "anthropic": {"client": AsyncAnthropic(base_url=server.root_url, api_key="k")},
            "base_url": {"base_url": server.base_url},
        }[kind]
        name = "claude-haiku-4-5" if kind == "anthropic" else "gpt-4o-mini"
        team = Team.from_project(team_root, model=name, persona="dev", tools=[forecast],
                                 include_git_log=False, **given)  # fmt: skip
        result = team.run("Weather?")
        routes = _server_routes(server)
    assert result.status == "done" and result.answer == "Sunny in Utrecht."
    provider = "anthropic" if kind == "anthropic" else "openai"
    assert result.model == f"{provider}:{name}"
    route = "/v1/messages" if kind == "anthropic" else "/v1/chat/completions"
    assert routes == [route] * 5


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"model": 42}, "model"),
        ({"model": "gpt-4o", "client": object()}, "client"),
        ({"model": "gpt-4o", "client": None, "base_url": "http://127.0.0.1:9/v1",
          "api_key": "k"}, None),
        ({"model": None, "base_url": "http://127.0.0.1:9/v1"}, "model"),
    ],
)  # fmt: skip
def test_a_model_given_wrongly_is_refused_naming_the_field(
    tmp_path: Path, given: dict[str, Any], field: str | None
) -> None:
    if field is None:  # a valid combination: built, nothing sent yet
        assert Team(root=tmp_path, **given).options().model == "openai:gpt-4o"
        return
    with pytest.raises(UsageError) as caught:
        Team(root=tmp_path, **given)
    assert caught.value.field == field


def _forecaster() -> Any:
    from personae import Persona

    return Persona(
        name="forecaster", description="Answers weather questions.",
        tools=["forecast", "read_file"], system_prompt="You are the forecaster.",
    )  # fmt: skip


def test_a_team_built_in_memory_runs_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from personae.models.scripted import ScriptedServer

    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    two_turns = {"steps": _tool_scenario()["steps"] * 2}
    (scenarios / "s.yaml").write_text(json.dumps(two_turns))
    work_dir = tmp_path / "cwd"
    work_dir.mkdir()
    monkeypatch.chdir(work_dir)
    with ScriptedServer(scenarios / "s.yaml") as server:
        team = Team.from_personas([_forecaster()], model="gpt-4o", base_url=server.base_url,
                                  tools=[forecast])  # fmt: skip
        first = team.run("Weather?")
        assert first.status == "done" and first.answer == "Sunny in Utrecht."
        assert [e.tool for e in first.events if isinstance(e, ToolCalled)] == ["forecast"]
        before = len(server.raw_requests)
        # the conversation goes on in memory: the next turn's worker sees the first turn
        again = team.run("And tomorrow?", session=first.session_id)
        later = json.dumps([body for _, body in server.raw_requests[before:]])
    assert again.session_id == first.session_id and "Weather?" in later
    assert not team.root.exists() and list(work_dir.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "scenarios"]
    assert team.store is not None
    stored = dict(team.store.conn.execute("SELECT id, status FROM runs").fetchall())
    assert stored == {first.run_id: "done", again.run_id: "done"}


def test_an_in_memory_team_without_a_workspace_offers_no_built_in_tools(tmp_path: Path) -> None:
    from personae.models.scripted import ScriptedServer

    (tmp_path / "s.yaml").write_text(json.dumps(_tool_scenario()))
    with ScriptedServer(tmp_path / "s.yaml") as server:
        team = Team.from_personas([_forecaster()], model="gpt-4o", base_url=server.base_url,
                                  tools=[forecast])  # fmt: skip
        team.run("Weather?")
        offered = {
            t["function"]["name"] for _, body in server.raw_requests for t in body.get("tools", [])
        }
    assert "forecast" in offered and "read_file" not in offered


def test_an_in_memory_team_with_a_workspace_acts_there(tmp_path: Path) -> None:
    from personae.models.scripted import ScriptedServer

    (tmp_path / "config.yaml").write_text("port: 8081\n")
    (tmp_path / "s.yaml").write_text(json.dumps(read_config_scenario("8081", description="ws")))
    with ScriptedServer(tmp_path / "s.yaml") as server:
        team = Team.from_personas([_forecaster()], model="gpt-4o", base_url=server.base_url,
                                  workspace=tmp_path)  # fmt: skip
        result = team.run("Port?")
    [read] = [e for e in result.events if isinstance(e, ToolCalled)]
    assert read.ok and "8081" in read.result
    assert not (tmp_path / ".personae").exists()


@pytest.mark.parametrize(
    ("personas", "needle"),
    [([], "at least one persona"), (["forecaster"], "Persona objects"),
     ("twice", "two personas are named 'forecaster'")],
)  # fmt: skip
def test_bad_personas_are_refused(personas: Any, needle: str) -> None:
    if personas == "twice":
        personas = [_forecaster(), _forecaster()]
    with pytest.raises(UsageError, match=needle):
        Team.from_personas(personas, model="scripted:x.yaml")


def test_a_cancelled_run_ends_its_open_spans(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import StatusCode

    from personae import CancelToken
    from personae.team.events import Event, SubtaskStarted

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    token = CancelToken()

    class CancelAtSubtask(RunHooks):
        def on_event(self, event: Event) -> None:
            if isinstance(event, SubtaskStarted):
                token.cancel()

    team = _desk(tmp_path, _tool_scenario(), tools=[forecast], instrument=provider,
                 hooks=[CancelAtSubtask()])  # fmt: skip
    result = team.run("Weather?", cancel=token)
    assert result.status == "cancelled"
    spans = {s.name: s for s in exporter.get_finished_spans()}
    root = spans["invoke_agent dev"]
    assert root.status.status_code is StatusCode.ERROR and "subtask 1" in spans
    assert root.attributes is not None and root.attributes["personae.run.status"] == "cancelled"


def test_hooks_and_spans_reach_into_sub_agents(tmp_path: Path) -> None:
    import shutil
    from importlib import resources

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    demo = Path(str(resources.files("personae.examples") / "demo"))
    root = tmp_path / "weather-service"
    shutil.copytree(demo / "project", root)
    seen: list[tuple[str, str, int | None]] = []
    roles: list[str] = []

    class Watch(RunHooks):
        def before_model(self, call: ModelCall) -> Veto | None:
            roles.append(call.role)
            return None

        def before_tool(self, call: ToolUse) -> Veto | None:
            seen.append((call.persona, call.tool, call.depth))
            return None

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    team = Team.from_project(root, model=f"scripted:{demo / 'scenario.yaml'}",
                             persona="maintainer", include_git_log=False, hooks=[Watch()],
                             instrument=provider)  # fmt: skip
    result = team.run("Give me the port the service listens on and the setup steps.")
    assert result.status == "done"
    assert ("scout", "read_file", 1) in seen and ("maintainer", "agent", None) in seen
    assert "subagent" in roles
    spans = exporter.get_finished_spans()
    [scout] = [s for s in spans if s.name == "invoke_agent scout"]
    [read] = [s for s in spans if s.name == "execute_tool read_file"]
    assert read.parent is not None and read.parent.span_id == scout.context.span_id
