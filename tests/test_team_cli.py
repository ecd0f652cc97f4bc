"""`personae run`, `runs`, `demo` and the handover flags, as real subprocesses.

`personae run --model scripted:FILE` starts the scripted OpenAI-compatible
server on 127.0.0.1 inside the child process: every model call crosses real
loopback HTTP through pydantic-ai's OpenAI provider.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from _helpers import dev_project, personae_cli, read_config_scenario


def scenario(answer: str) -> dict[str, Any]:
    return read_config_scenario(answer, description="scripted CLI test")


REFUSING = {
    "description": "a worker that only ever calls run_shell (scripted)",
    "steps": [{"when": {"role": "manager"},
               "output": {"subtasks": [{"description": "Read config"}]}}],
    "rules": [
        {"when": {"role": "worker"},
         "tool_calls": [{"name": "run_shell", "args": {"command": "touch PWNED"}}]},
        {"when": {"role": "manager"}, "text": "SYNTHESIS"},
    ],
}  # fmt: skip


@pytest.fixture
def project(tmp_path: Path, offline_home: Path) -> Path:
    answers = {"one": "ANSWER-ONE port 8081", "two": "ANSWER-TWO"}
    return dev_project(tmp_path, {name: scenario(answer) for name, answer in answers.items()})


def personae(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return personae_cli(*args, cwd=cwd, check=check)


@pytest.mark.process
def test_run_end_to_end_over_loopback_http(project: Path) -> None:
    spec = f"scripted:{project.parent / 'one.yaml'}"
    done = personae(project, "run", "What port?", "--persona", "dev", "--model", spec,
                    "--json", "--session", "s1")  # fmt: skip
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [e["kind"] for e in events]
    assert kinds[:2] == ["start", "plan"] and kinds[-1] == "final"
    numbered = [e["seq"] for e in events if e["kind"] != "answer_delta"]
    assert numbered == list(range(1, len(numbered) + 1))
    # The answer's text pieces take no number: each carries the one of the event before it.
    for before, event in itertools.pairwise(events):
        if event["kind"] == "answer_delta":
            assert event["seq"] == before["seq"]
    assert len({e["run_id"] for e in events}) == 1
    assert events[0]["data"]["task"] == "What port?" and events[0]["data"]["persona"] == "dev"
    assert {"subtask_start", "tool_call", "work_result", "validation"} <= set(kinds)
    assert events[-1]["message"] == "ANSWER-ONE port 8081"
    assert events[-1]["data"]["status"] == "done"
    run_id = events[0]["run_id"]

    listed = json.loads(personae(project, "runs", "list", "--json").stdout)
    assert listed[0]["id"] == run_id and listed[0]["model"].startswith("scripted")
    shown = json.loads(personae(project, "runs", "show", run_id, "--json").stdout)
    # Stored: every event but the answer's streamed pieces (the final event holds it whole).
    assert [e["kind"] for e in shown["events"]] == [k for k in kinds if k != "answer_delta"]
    deltas = [e["data"]["text"] for e in events if e["kind"] == "answer_delta"]
    assert len(deltas) > 1 and "".join(deltas).strip() == events[-1]["message"]
    calls = shown["model_calls"]
    assert [c["role"] for c in calls] == ["manager", "worker", "worker", "validator", "manager"]
    for call in calls:
        assert "<task>" in call["context_text"]
        assert call["budget"]["sections"] and call["budget"]["budget"] > 0

    # The next run in the same session sees the conversation.
    spec_two = f"scripted:{project.parent / 'two.yaml'}"
    personae(project, "run", "And the host?", "--persona", "dev", "--model", spec_two,
             "--json", "--session", "s1")  # fmt: skip
    second = json.loads(personae(project, "runs", "list", "--json").stdout)[0]
    calls_two = json.loads(personae(project, "runs", "show", second["id"], "--json").stdout)
    assert all("ANSWER-ONE" in c["context_text"] for c in calls_two["model_calls"])
    # A new session does not.
    personae(project, "run", "And the host?", "--persona", "dev", "--model", spec_two, "--json")
    third = json.loads(personae(project, "runs", "list", "--json").stdout)[0]
    calls_three = json.loads(personae(project, "runs", "show", third["id"], "--json").stdout)
    assert not any("ANSWER-ONE" in c["context_text"] for c in calls_three["model_calls"])


def test_live_view_and_runs_show_text(project: Path) -> None:
    spec = f"scripted:{project.parent / 'one.yaml'}"
    done = personae(project, "run", "What port?", "--persona", "dev", "--model", spec)
    head = done.stdout.splitlines()[0]
    assert head.startswith("Run run-") and head.endswith("started; loading the team ...")
    assert "Plan: 1 subtask(s)" in done.stdout
    assert "Answer (done):" in done.stdout and "ANSWER-ONE" in done.stdout
    run_id = done.stdout.split("personae runs show ")[1].split()[0]
    shown = personae(project, "runs", "show", run_id).stdout
    assert "Context Budget Report (role: validator" in shown
    assert "5 model call(s)" in shown


@pytest.mark.process
def test_user_mistakes_are_one_line_errors(project: Path) -> None:
    # Each mistake is found before a run is stored: usage (exit 2), one line, no run.
    no_model = personae(project, "run", "hi", check=False)
    assert no_model.returncode == 2
    assert no_model.stderr.startswith("personae: error: no model configured")
    assert "Traceback" not in no_model.stderr
    spec = f"scripted:{project.parent / 'one.yaml'}"
    bad = personae(project, "run", "hi", "--persona", "deev", "--model", spec, check=False)
    assert bad.returncode == 2 and "did you mean 'dev'" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    missing = personae(project, "runs", "show", "nope", check=False)
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    wrong = personae(project, "run", "hi", "--model", "scripted:/no/such.yaml", check=False)
    assert wrong.returncode == 2 and "scenario file not found" in wrong.stderr
    broken = project / ".personae" / "personas" / "broken.md"
    broken.write_text("---\nname: broken\ndescription: x\nmax_steps: lots\n---\nhi\n")
    bad_file = personae(project, "run", "hi", "--persona", "broken", "--model", spec, check=False)
    assert bad_file.returncode == 2
    assert bad_file.stderr.startswith(f"personae: error: {broken}:4: ")
    # None of these mistakes became a run: nothing was stored, nothing was announced.
    for done in (no_model, bad, wrong, bad_file):
        assert "started" not in done.stdout
    listed = personae(project, "runs", "list", "--json")
    assert json.loads(listed.stdout) == []


def test_usage_mistakes_exit_2_in_one_line_and_store_no_run(project: Path) -> None:
    spec = f"scripted:{project.parent / 'one.yaml'}"
    cases = {
        ("run", "--persna", "dev", "hi"): "--persona",  # click's own usage error
        ("run", "--max-retries", "-1", "hi"): "--max-retries",
        ("run", "--model", spec): "give a TASK",  # no task, no terminal to ask on
        ("run", "hi", "--model", "opnai:gpt-4o"): "did you mean 'openai'",
        ("run", "hi", "--model", spec, "--profile", "buildr"): "did you mean 'builder'",
        ("nosuch",): "No such command",
    }
    for args, text in cases.items():
        done = personae(project, *args, check=False)
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("personae: error: "), done.stderr
        assert text in lines[0] and "╭" not in done.stderr and done.stdout == ""
    assert json.loads(personae(project, "runs", "list", "--json").stdout) == []


def test_run_outside_a_project_writes_nothing(tmp_path: Path, offline_home: Path) -> None:
    folder = tmp_path / "not-a-project"
    folder.mkdir()
    done = personae(folder, "run", "hi", "--model", "openai:gpt-4o", check=False)
    assert done.returncode == 1
    assert done.stderr.startswith("personae: error: no personae project in ")
    assert "personae init" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert list(folder.iterdir()) == []


def test_handover_round_trip(project: Path) -> None:
    handover = project / "handover.json"
    personae(project, "handover", "create", "--to", "dev", "--task", "What port?",
             "--out", str(handover))  # fmt: skip
    spec = f"scripted:{project.parent / 'one.yaml'}"
    back = project / "results.json"
    done = personae(project, "run", "--context-from", str(handover), "--non-interactive",
                    "--context-return", str(back), "--model", spec, "--json")  # fmt: skip
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[-1]["data"]["status"] == "done"
    results = json.loads(back.read_text())["results"]
    assert results["status"] == "success"
    assert "ANSWER-ONE" in results["output"]


def test_demo_runs_offline_and_says_scripted(isolated_home: Path, tmp_path: Path) -> None:
    done = personae(tmp_path, "demo")
    out = done.stdout
    assert "Answers: SCRIPTED" in out and "not a real language model" in out
    assert "Plan: 2 subtask(s)" in out
    assert "REJECTED: no tool was used" in out  # the hallucination is caught ...
    assert "Correction (1/2): retry" in out  # ... and corrected
    assert "sub-agent scout starts" in out
    assert "Answer (done):" in out and "8081" in out


def test_timeout_cancels_the_run_and_records_it(project: Path) -> None:
    spec = f"scripted:{project.parent / 'one.yaml'}"
    done = personae(project, "run", "What port?", "--persona", "dev", "--model", spec,
                    "--handover-timeout", "1ms", check=False)  # fmt: skip
    assert done.returncode == 1 and "run took longer than 0.001 s" in done.stderr
    listed = json.loads(personae(project, "runs", "list", "--json").stdout)
    assert listed[0]["status"] == "cancelled"


def test_repeated_disallowed_tool_is_a_worker_failure(project: Path) -> None:
    """pydantic-ai ends a run whose model keeps calling an unknown tool with
    UnexpectedModelBehavior; the worker turns it into a failure with a clear event."""
    (project.parent / "refuse.yaml").write_text(yaml.safe_dump(REFUSING))
    spec = f"scripted:{project.parent / 'refuse.yaml'}"
    done = personae(project, "run", "What port?", "--persona", "dev", "--model", spec,
                    "--json", "--max-retries", "1", check=False)  # fmt: skip
    assert done.returncode == 5, done.stderr  # partial: nothing validated, told apart from done
    assert "Traceback" not in done.stderr and "UnexpectedModelBehavior" not in done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    stops = [e for e in events if e["data"].get("action") == "worker_stopped"]
    assert len(stops) == 2  # the first attempt and the one retry
    assert stops[0]["data"]["refused_tools"] == ["run_shell"]
    assert "kept calling 'run_shell'" in stops[0]["message"]
    assert "persona dev may not use (allowed: grep, read_file)" in stops[0]["message"]
    works = [e for e in events if e["kind"] == "work_result"]
    assert [w["data"]["success"] for w in works] == [False, False]
    assert works[0]["message"] == stops[0]["message"]
    refused = [e for e in events if e["kind"] == "tool_call"]
    assert refused and all(not e["data"]["ok"] for e in refused)
    assert {e["data"]["tool"] for e in refused} == {"run_shell"}
    final = events[-1]
    assert final["kind"] == "final" and final["data"]["status"] == "partial"
    assert [(t["number"], t["status"]) for t in final["data"]["subtasks"]] == [(1, "skipped")]
    assert not (project / "PWNED").exists()  # the refused tool never ran
    listed = json.loads(personae(project, "runs", "list", "--json").stdout)
    assert listed[0]["status"] == "partial"


CHECK_FIRST_LINE = """
import sys
seen = []
heavy = ("pydantic_ai", "personae.team.session", "personae.team.loop", "openai")
real = sys.stdout.write
def write(text):
    if not seen:
        seen.append(sorted(m for m in heavy if m in sys.modules))
        sys.stderr.write("HEAVY-AT-FIRST-LINE=" + ",".join(seen[0]) + "\\n")
    return real(text)
sys.stdout.write = write
from personae.cli.app import run_cli
run_cli(sys.argv[1:])
"""


@pytest.mark.process
def test_start_event_comes_before_the_heavy_imports(project: Path) -> None:
    """The first line (the start event) is written before pydantic-ai and the team load."""
    spec = f"scripted:{project.parent / 'one.yaml'}"
    done = subprocess.run(
        [sys.executable, "-c", CHECK_FIRST_LINE, "run", "What port?", "--persona", "dev",
         "--model", spec, "--json"],
        check=False, cwd=project, capture_output=True, text=True, timeout=120,
        env=os.environ.copy(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "HEAVY-AT-FIRST-LINE=\n" in done.stderr  # none of them imported yet
    first = json.loads(done.stdout.splitlines()[0])
    assert first["kind"] == "start" and first["seq"] == 1
    assert json.loads(done.stdout.splitlines()[-1])["kind"] == "final"
