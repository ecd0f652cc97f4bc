"""The real-model lane: personae's journeys against a real instruct model on loopback.

llama-cpp-python's OpenAI-compatible server runs SmolLM2-135M-Instruct (Q4_1, 2,048-token
window, one thread) behind a recording proxy. Each journey (init + the sample task, the
demo project, ``Team.run``, a handover, a chain, a replay of a stored run, a run tree
under a shared token cap) must end with a clear status within a
bounded number of calls and seconds, with no traceback; the window is discovered (no
guess warning); every request carries ``max_tokens``; plans parse in at least 9 of 10
tries. A 135M model answers badly: the lane checks that personae stays in control of a
real model, not the quality of its answers. Without the server installed
(scripts/setup.d/80-real-model.sh) every test here fails with that message.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic_ai.models import override_allow_model_requests

from _helpers import personae_cli, run_async

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from _llama import WINDOW, RecordingProxy, llama_server, missing, real_chain

from personae.api.results import Limits
from personae.api.team import Team
from personae.models import ModelResolver
from personae.models.output import OUTPUT_MODES
from personae.store.conversations import ConversationStore, Message
from personae.store.db import Store
from personae.team.bounds import CallBounds
from personae.team.events import EventBus
from personae.team.manager import plan_instructions
from personae.team.runtime import CallInfo, Runtime
from personae.team.signals import Plan
from personae.team.structured import StructuredOutputError, ask_structured
from personae.tokens.calibration import Calibration
from personae.tokens.registry import counter_for_model

pytestmark = pytest.mark.real_model

MODEL = "openai:smollm2"
MAX_REQUESTS = 8
"""Model requests a journey may make (all roles)."""
DEADLINE = 45
"""Seconds after which a journey starts no model request."""
BOUNDS = ["--max-requests", str(MAX_REQUESTS), "--deadline", str(DEADLINE), "--max-retries", "0"]
CAP = WINDOW // 4
"""The output cap every request must carry: a quarter of the discovered window."""


@pytest.fixture(scope="module")
def server() -> Iterator[RecordingProxy]:
    """The real model server behind a recording proxy (fails, never skips, when missing)."""
    why = missing()
    if why is not None:
        pytest.fail(f"the real-model lane needs a real model server: {why}")
    with llama_server() as upstream, RecordingProxy(upstream) as proxy:
        yield proxy


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One data folder for the journeys, as on a user's machine: the first run asks the
    server its window (the overflow probe) and the others remember it."""
    return tmp_path_factory.mktemp("home")


@pytest.fixture
def env(server: RecordingProxy, home: Path) -> dict[str, str]:
    """What a user sets to use their local server (README: OPENAI_BASE_URL + the model)."""
    return {"OPENAI_BASE_URL": server.base_url, "PERSONAE_MODEL": MODEL,
            "PERSONAE_HOME": str(home)}  # fmt: skip


def _all_capped(sent: list[dict[str, Any]]) -> None:
    """Every request (but the window probe, capped at 1) carried max_tokens within the cap."""
    asked = [b for b in sent if b.get("max_tokens") != 1]
    over = [(b.get("max_tokens"), str(b.get("messages"))[:160]) for b in asked
            if not 0 < int(b.get("max_tokens") or 0) <= CAP]  # fmt: skip
    assert asked and not over, over


def _events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def _ended_clearly(done: Any, started: float, server: RecordingProxy, before: int) -> list[Any]:
    """The journey's events, after checking it ended with a status, within its bounds."""
    assert "Traceback" not in done.stderr + done.stdout, (done.stdout, done.stderr)
    events = _events(done.stdout)
    assert events and events[-1]["kind"] == "final", (done.stdout[-2000:], done.stderr[-2000:])
    assert events[-1]["data"]["status"] in ("done", "partial"), events[-1]
    status = events[-1]["data"]["status"]
    assert done.returncode == (0 if status == "done" else 5), done.stderr  # partial: 5
    assert time.monotonic() - started < DEADLINE + 60
    usage = events[-1]["data"]["usage"]
    assert usage["requests"] <= MAX_REQUESTS
    # answers streamed without usage are counted by personae (a call cut at the deadline
    # has no answer and counts no request)
    assert usage["output_tokens"] > 0 or usage["requests"] == 0, usage
    warned = [e for e in events if e["data"].get("action") == "window_guessed"]
    assert not warned, warned  # the window was discovered
    _all_capped(server.chat()[before:])
    return events


def _init_project(tmp_path: Path, env: dict[str, str]) -> Path:
    root = tmp_path / "proj"
    personae_cli("init", str(root), env=env, check=True)
    return root


def test_init_and_the_sample_task(tmp_path: Path, env: dict[str, str],
                                  server: RecordingProxy) -> None:  # fmt: skip
    root = _init_project(tmp_path, env)
    before, started = len(server.chat()), time.monotonic()
    done = personae_cli("run", "Total March revenue", "--persona", "analyst", "--json", *BOUNDS,
                        cwd=root, env=env, timeout=DEADLINE + 120, process=True)  # fmt: skip
    events = _ended_clearly(done, started, server, before)
    assert any(e["kind"] == "plan" for e in events)


def test_the_demo_project(tmp_path: Path, env: dict[str, str], server: RecordingProxy) -> None:
    root = tmp_path / "demo"
    bundle = Path(str(resources.files("personae.examples") / "demo" / "project"))
    shutil.copytree(bundle, root)
    before, started = len(server.chat()), time.monotonic()
    done = personae_cli("run", "Give me the port the service listens on.", "--persona",
                        "maintainer", "--json", *BOUNDS, cwd=root, env=env,
                        timeout=DEADLINE + 120, process=True)  # fmt: skip
    _ended_clearly(done, started, server, before)


def test_team_run_from_python(
    tmp_path: Path, env: dict[str, str], server: RecordingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _init_project(tmp_path, env)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    limits = Limits(max_requests=MAX_REQUESTS, deadline=DEADLINE, max_retries=0)
    team = Team.from_project(root, model=MODEL, persona="analyst", limits=limits)
    before, started = len(server.chat()), time.monotonic()
    with override_allow_model_requests(True):
        result = team.run("Total March revenue")
    assert result.status in ("done", "partial")
    assert result.usage.requests <= MAX_REQUESTS
    assert time.monotonic() - started < DEADLINE + 60
    _all_capped(server.chat()[before:])


def test_a_handover(tmp_path: Path, env: dict[str, str], server: RecordingProxy) -> None:
    root = _init_project(tmp_path, env)
    handover = root / "to-analyst.json"
    personae_cli("handover", "create", "--to", "analyst", "--task", "Total March revenue",
                 "--insight", "The figures are in .personae/samples/sales.csv",
                 "--out", str(handover), cwd=root, env=env, check=True)  # fmt: skip
    before, started = len(server.chat()), time.monotonic()
    done = personae_cli("run", "--context-from", str(handover), "--non-interactive", "--json",
                        *BOUNDS, cwd=root, env=env, timeout=DEADLINE + 120,
                        process=True)  # fmt: skip
    _ended_clearly(done, started, server, before)


def test_a_chain(tmp_path: Path, env: dict[str, str], server: RecordingProxy) -> None:
    root = tmp_path / "chain"
    real_chain(root, DEADLINE)
    before, started = len(server.chat()), time.monotonic()
    done = personae_cli(
        "chain", "run", "workflow.yaml", cwd=root, env=env, timeout=400, process=True
    )
    assert "Traceback" not in done.stderr + done.stdout, (done.stdout, done.stderr)
    assert time.monotonic() - started < 2 * (DEADLINE + 60)
    report = root / ".personae" / "chains" / "sales-report" / "report.json"
    assert report.is_file(), (done.stdout[-2000:], done.stderr[-2000:])
    steps = json.loads(report.read_text()).get("steps")
    assert steps and set(steps) == {"analyse", "report"}, report.read_text()
    statuses = {step["status"] for step in steps.values()}
    assert statuses <= {"success", "partial"}, report.read_text()  # each ended clearly
    assert done.returncode == (0 if statuses == {"success"} else 5), done.stderr
    _all_capped(server.chat()[before:])


TASKS = [
    "Total March revenue", "List the regions in the sales data", "Summarise the brief",
    "Find the month with the highest revenue", "Write a one-line status report",
    "Count the rows of the sales file", "Compare north and south revenue",
    "Name the files in the project", "Explain what the analyst persona does",
    "Draft the March report title",
]  # fmt: skip


def test_plans_parse_on_a_real_small_model(
    server: RecordingProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Manager's plan call, as runs make it (instructions, schema, output mode, retries):
    at least 9 of 10 parse."""
    monkeypatch.setenv("PERSONAE_HOME", str(tmp_path / "home"))  # the window is asked afresh
    resolver = ModelResolver(default=MODEL, base_url=server.base_url)
    runtime = Runtime(models=resolver, bus=EventBus("plans"),
                      bounds=CallBounds(deadline=240))  # fmt: skip
    facts = resolver.facts()
    assert facts.window == WINDOW and not facts.guessed, facts
    assert facts.server == "llama-cpp-python" and facts.output_mode in OUTPUT_MODES
    assert facts.output_mode == "native"
    instructions = plan_instructions(None)
    parsed, errors = 0, []

    async def ask(task: str) -> Plan:
        prompt = f"<task>\n{task}\n</task>"
        info = CallInfo(role="manager", persona=None, subtask=None,
                        context_text=prompt, budget={})  # fmt: skip
        return await ask_structured(runtime, info, instructions=instructions, prompt=prompt,
                                    output_type=Plan)  # fmt: skip

    with override_allow_model_requests(True):
        for task in TASKS:
            try:
                plan = run_async(ask(task), timeout=120)
            except StructuredOutputError as exc:
                errors.append(str(exc))
                continue
            parsed += 1
            assert plan.subtasks
    resolver.close()
    assert parsed >= 9, errors


REPLAY_EXIT = {"done": 0, "partial": 5, "failed": 1, "cancelled": 130}
"""A replay's exit code by the status it ended with (``personae run``'s)."""
SMALL = ["--max-requests", "2", "--deadline", "150", "--max-retries", "0"]
"""Bounds of the replayed run: two calls (the plan and a worker's first step; a call on
the 135M model takes 20-40 s on two busy cores), so the run ends partial at its cap."""


def _asked(sent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chat requests that asked for an answer (not the window probe, capped at 1)."""
    return [b for b in sent if b.get("max_tokens") != 1]


def test_a_replay_of_a_real_run(tmp_path: Path, env: dict[str, str],
                                server: RecordingProxy) -> None:  # fmt: skip
    """A stored real-model run replayed from call 2 against the same model: a new run
    linked to it, a clear status and exit code, call 1 answered from the record (no request
    reaches the server for it), then compare and diff on the two runs' calls."""
    root = _init_project(tmp_path, env)
    ran = personae_cli("run", "Total March revenue", "--persona", "analyst", "--json", *SMALL,
                       cwd=root, env=env, timeout=300, process=True)  # fmt: skip
    assert "Traceback" not in ran.stderr + ran.stdout, ran.stderr
    original = json.loads(ran.stdout.splitlines()[0])["run_id"]
    old = json.loads(personae_cli("runs", "show", original, "--json", cwd=root, env=env,
                                  check=True).stdout)  # fmt: skip
    assert len(old["model_calls"]) >= 2, (ran.stdout[-3000:], ran.stderr[-1500:])
    # llama-cpp-python ends a streamed answer without usage: the call is marked, and runs
    # show gives our count alone, never a drift of zero made up from it
    text = personae_cli("runs", "show", original, cwd=root, env=env, check=True).stdout
    for u in (c["usage"] for c in old["model_calls"] if c["usage"].get("reported") is False):
        line = f"input tokens: {u['input_tokens']:,} (ours, {u['counter']}; the provider reported"
        assert line in text, (line, text[:3000])
    before, started = len(server.chat()), time.monotonic()
    done = personae_cli("runs", "replay", original, "--from", "2", "--json", cwd=root, env=env,
                        timeout=300, process=True)  # fmt: skip
    assert "Traceback" not in done.stderr + done.stdout, (done.stdout, done.stderr)
    assert time.monotonic() - started < 150 + 60
    result = json.loads(done.stdout)
    assert result["replay_of"] == original and result["status"] in REPLAY_EXIT, result
    assert done.returncode == REPLAY_EXIT[result["status"]], done.stderr
    assert result["replay"]["from_call"] == 2 and result["replay"]["recorded_calls"] == 1
    new = result["run_id"]
    shown = json.loads(personae_cli("runs", "show", new, "--json", cwd=root, env=env,
                                    check=True).stdout)  # fmt: skip
    assert shown["run"]["replay_of"] == original
    calls = shown["model_calls"]
    first = calls[0]
    assert first["usage"]["recorded_from"] == 1
    assert first["answer"] == old["model_calls"][0]["answer"]
    live = [c for c in calls if "recorded_from" not in c["usage"]]
    assert len(live) == len(calls) - 1
    # The recorded plan (a structured answer) parsed in the replay's agent: the run went on
    # to the same worker call as the original, live, and stopped at the same request cap.
    assert [c["role"] for c in calls] == [c["role"] for c in old["model_calls"]]
    assert len(calls) == 2 and live[0]["model"] == MODEL
    # Only the live calls reached the server: call 1 came from the record.
    sent = _asked(server.chat()[before:])
    assert len(sent) == len(live), (len(sent), [c["role"] for c in calls])
    if sent:
        _all_capped(sent)
    compared = json.loads(personae_cli("runs", "compare", original, new, "--json", cwd=root,
                                       env=env, check=True).stdout)  # fmt: skip
    assert compared["pairs"][0]["same"] and compared["a"]["calls"] == len(old["model_calls"])
    assert compared["b"]["calls"] == len(calls)
    diff = personae_cli("runs", "diff", f"{original}:1", f"{new}:1", "--json", cwd=root,
                        env=env, check=True)  # fmt: skip
    sections = json.loads(diff.stdout)["sections"]
    assert sections and all(s["change"] == "same" for s in sections), sections
    if len(calls) >= 2:
        inner = personae_cli("runs", "diff", new, "1", "2", cwd=root, env=env, check=True)
        assert "Traceback" not in inner.stdout + inner.stderr and inner.stdout.strip()


def test_the_real_servers_input_tokens_and_the_drift_of_ours(
    tmp_path: Path, env: dict[str, str], server: RecordingProxy
) -> None:
    """A call the real server answers whole (not streamed) carries its usage: a turn on a
    session longer than the recent window first folds the older messages with one summary
    call, and runs show prints the server's input tokens and how far ours is from them."""
    root = _init_project(tmp_path, env)
    with Store(root / ".personae" / "state.db") as store:
        conversations = ConversationStore(store, counter_for_model(MODEL))
        session = conversations.create_session(title="earlier")
        for t in range(10):
            conversations.append_many(session, [
                Message("user", f"What was the revenue of week {t}?"),
                Message("assistant", f"Week {t}: {1000 + 37 * t} EUR, from sales.csv."),
            ])  # fmt: skip
    ran = personae_cli("run", "Total March revenue", "--persona", "analyst", "--session",
                       session, "--json", *SMALL, cwd=root, env=env, timeout=300,
                       process=True)  # fmt: skip
    assert "Traceback" not in ran.stderr + ran.stdout, ran.stderr
    run_id = json.loads(ran.stdout.splitlines()[0])["run_id"]
    shown = json.loads(personae_cli("runs", "show", run_id, "--json", cwd=root, env=env,
                                    check=True).stdout)  # fmt: skip
    (summary,) = [c for c in shown["model_calls"] if c["role"] == "summarizer"]
    u = summary["usage"]
    assert u.get("reported") is not False and u["input_tokens"] > 0, u  # the server's figure
    assert u["counted_input_tokens"] > 0 and u["counter"] == counter_for_model(MODEL).name
    drift = 100 * (u["counted_input_tokens"] - u["input_tokens"]) / u["input_tokens"]
    text = personae_cli("runs", "show", run_id, cwd=root, env=env, check=True).stdout
    line = f"input tokens: {u['input_tokens']:,} (provider; ours {drift:+.1f}%, {u['counter']})"
    assert line in text, (line, text[:3000])
    # the run learned from it: the next budget narrows if the server counted more than we did
    with Store(root / ".personae" / "state.db") as store:
        factor, runs = Calibration(store).request_factor(MODEL)
        narrowing = Calibration(store).narrowing(MODEL)
    assert runs == 1 and factor == round(u["input_tokens"] / u["counted_input_tokens"], 3)
    assert (narrowing > 1) == (u["input_tokens"] > u["counted_input_tokens"])
    print(f"real drift of the summary call: {line}; request factor {factor}")  # the note quotes it


def test_a_run_tree_on_the_real_model_stops_at_the_cap_its_child_shares(
    tmp_path: Path, env: dict[str, str], server: RecordingProxy
) -> None:
    """A one-step chain is a run with one child run (a real `personae run` process): the
    tree shows the child under its parent with the provider's tokens and ours, and a token
    cap the child inherits stops it and the tree as partial (exit 5)."""
    root = tmp_path / "chain"
    real_chain(root, DEADLINE)
    workflow = root / "workflow.yaml"
    spec = yaml.safe_load(workflow.read_text())
    spec["steps"] = spec["steps"][:1]
    workflow.write_text(yaml.safe_dump(spec))
    cap = 600  # below one call's context on the analyst step: the first call crosses it
    before, started = len(server.chat()), time.monotonic()
    done = personae_cli("chain", "run", "workflow.yaml", "--max-tokens-total", str(cap), "--json",
                        cwd=root, env=env, timeout=DEADLINE + 120, process=True)  # fmt: skip
    assert "Traceback" not in done.stderr + done.stdout, (done.stdout, done.stderr)
    assert time.monotonic() - started < DEADLINE + 60
    assert done.returncode == 5, (done.stdout[-2000:], done.stderr[-2000:])
    last = json.loads(done.stdout.splitlines()[-1])
    assert last["event"] == "done" and last["status"] == "partial", last
    shown = personae_cli("runs", "show", last["run"], "--tree", "--json", cwd=root, env=env,
                         check=True)  # fmt: skip
    tree = json.loads(shown.stdout)
    assert tree["status"] == "partial" and tree["budget"] == {"tokens": cap}, tree
    (child,) = tree["children"]
    assert child["parent_run"] == last["run"] and child["trace_id"] == tree["trace_id"]
    assert child["status"] == "partial" and child["budget"] == {"tokens": cap}
    own = child["own"]
    assert own["calls"] >= 1 and own["tokens"] >= cap  # stopped by the cap, not before it
    assert own["input_tokens"] > 0 and own["output_tokens"] > 0  # the provider's figures
    assert own["counted_input_tokens"] > 0  # ours
    assert tree["total"]["calls"] == own["calls"] and tree["total"]["tokens"] == own["tokens"]
    assert len(_asked(server.chat()[before:])) == own["calls"]
    text = personae_cli("runs", "show", last["run"], "--tree", cwd=root, env=env, check=True)
    assert f"└─ {child['run']} [partial]" in text.stdout
