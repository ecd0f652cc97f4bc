"""Chains: workflows, fan-out with a concurrency limit, aggregation, resume after kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from _chain_parentprog import PARENT
from _handover_childprog import calls, command
from _helpers import personae_cli, wait_until
from personae.errors import UsageError
from personae.workflow.chain import execute_chain, state_dir_for
from personae.workflow.executors import LocalProcessExecutor
from personae.workflow.spec import load_workflow


def write(root: Path, steps: list[Any], **extra: Any) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / "workflow.yaml"
    path.write_text(yaml.safe_dump({"name": "demo", "steps": steps, **extra}))
    return path


def step(sid: str, persona: str = "analyst", **kw: Any) -> dict[str, Any]:
    return {"id": sid, "persona": persona, "task": f"do {sid}", **kw}


def behave(**b: Any) -> dict[str, Any]:
    return {"data": {"behave": b}}


def by_step(root: Path, log_name: str = "calls.log") -> dict[str, int]:
    """How many times each step's child finished (or started) its work."""
    ids: dict[str, str] = {}
    for f in (state_dir_for(load_workflow(root / "workflow.yaml")) / "handovers").glob("*.json"):
        ids[json.loads(f.read_text())["handoverId"]] = f.stem
    counts: dict[str, int] = {}
    for c in calls(root, log_name):
        key = ids.get(str(c["id"]), "?")
        counts[key] = counts.get(key, 0) + 1
    return counts


# --- workflow files ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "needle"),
    [
        ([step("a"), step("a")], "duplicate step id 'a'"),
        ([step("a", inputs=["zzz"])], "input 'zzz'"),
        ([step("a"), {"parallel": [step("b"), step("c", inputs=["b"])]}], "input 'b'"),
        ([step("Bad Id")], "step id"),
        ([{"id": "a", "persona": "x"}], "task"),
        ([step("a", persona="--evil")], "persona"),
        ([{"parallel": []}], "parallel"),
        ([step("a", files=["x.csv:binary"])], "unknown type"),
    ],
)
def test_bad_workflows_refused(tmp_path: Path, steps: list[Any], needle: str) -> None:
    with pytest.raises(UsageError) as err:
        load_workflow(write(tmp_path, steps))
    assert needle in str(err.value)
    assert "workflow.yaml" in str(err.value)


def test_malformed_workflow_yaml(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("name: x\nsteps: [\n")
    with pytest.raises(UsageError, match="malformed YAML"):
        load_workflow(path)


def test_default_inputs_are_the_previous_stage(tmp_path: Path) -> None:
    wf = load_workflow(
        write(tmp_path, [step("a"), {"parallel": [step("b"), step("c")]}, step("d")])
    )
    assert [[s.id for s in stage] for stage in wf.stages] == [["a"], ["b", "c"], ["d"]]
    by = {s.id: s for s in wf.steps()}
    assert wf.inputs_of(by["a"]) == []
    assert wf.inputs_of(by["c"]) == ["a"]
    assert wf.inputs_of(by["d"]) == ["b", "c"]


# --- running ---------------------------------------------------------------------------


def test_sequential_chain_passes_results_and_aggregates(tmp_path: Path) -> None:
    root = tmp_path / "p"
    wf = load_workflow(
        write(root, [step("analyse", "data-analyst"), step("report", "report-writer")])
    )
    out = execute_chain(wf, executor=LocalProcessExecutor(command=command))
    assert out.status == "success" and out.exit_code == 0
    report = out.steps["report"].output or ""
    assert "history: data-analyst=data-analyst did: do analyse" in report
    handover = json.loads((out.state_dir / "handovers" / "report.json").read_text())
    assert handover["source"]["persona"] == "data-analyst"
    assert handover["artifacts"]["data"]["inputs"]["analyse"]["status"] == "success"
    assert handover["artifacts"]["files"][0]["path"] == "out-data-analyst.txt"
    text = out.report_path.read_text()
    assert "# Chain demo: success" in text and "| report | report-writer | success |" in text
    assert json.loads(out.report_path.with_suffix(".json").read_text())["exitCode"] == 0


def _overlap(root: Path) -> int:
    events = sorted(
        [(float(c["start"]), 1) for c in calls(root)] + [(float(c["end"]), -1) for c in calls(root)]  # type: ignore[arg-type]
    )
    peak = cur = 0
    for _, delta in events:
        cur += delta
        peak = max(peak, cur)
    return peak


@pytest.mark.parametrize("limit", [1, 2])
def test_fan_out_respects_concurrency_limit(tmp_path: Path, limit: int) -> None:
    root = tmp_path / "p"
    group = [step(f"s{i}", **behave(sleep=2.5)) for i in range(3)]
    wf = load_workflow(write(root, [{"parallel": group}, step("merge")]))
    out = execute_chain(wf, concurrency=limit, executor=LocalProcessExecutor(command=command))
    assert out.status == "success"
    assert _overlap(root) == limit
    merged = out.steps["merge"].output or ""
    assert all(f"analyst did: do s{i}" in merged for i in range(3))


def test_failed_step_stops_the_chain_and_resume_retries_it(tmp_path: Path) -> None:
    root = tmp_path / "p"
    steps = [step("a"), step("b", **behave(fail_times=2)), step("c")]
    wf = load_workflow(write(root, steps, defaults={"retries": 0, "backoff": 0.01}))
    out = execute_chain(wf, executor=LocalProcessExecutor(command=command))
    assert out.exit_code == 3
    assert [out.steps[k].status for k in "abc"] == ["success", "failure", "skipped"]
    assert "| c | analyst | skipped |" in out.report_path.read_text()
    again = execute_chain(wf, resume=True, executor=LocalProcessExecutor(command=command))
    assert [again.steps[k].status for k in "abc"] == ["success", "failure", "skipped"]
    third = execute_chain(wf, resume=True, executor=LocalProcessExecutor(command=command))
    assert third.status == "success" and third.resumed == ["a"]
    assert by_step(root) == {"a": 1, "b": 3, "c": 1}


def test_resume_refuses_changed_workflow(tmp_path: Path) -> None:
    root = tmp_path / "p"
    path = write(root, [step("a")])
    execute_chain(load_workflow(path), executor=LocalProcessExecutor(command=command))
    write(root, [step("a"), step("b")])
    with pytest.raises(UsageError, match="workflow changed"):
        execute_chain(load_workflow(path), resume=True)


def _wait_for(check: Any, limit: float = 60.0) -> None:
    wait_until(check, limit, interval=0.05)


def _checkpoint(root: Path) -> dict[str, Any]:
    path = root / ".personae" / "chains" / "demo" / "checkpoint.json"
    try:
        return json.loads(path.read_text())["steps"]  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return {}


def _parent(root: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(PARENT), str(root / "workflow.yaml"), *args],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("child_dies_too", [False, True])
def test_resume_after_kill_9_of_the_parent(tmp_path: Path, child_dies_too: bool) -> None:
    root = tmp_path / "p"
    write(root, [step("a"), step("b", **behave(sleep=4)), step("c")])
    parent = _parent(root)
    _wait_for(lambda: _checkpoint(root).get("b", {}).get("pid"))
    _wait_for(lambda: len(calls(root, "started.log")) == 2)  # b's child is at work
    assert _checkpoint(root)["a"]["status"] == "success"
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert parent.returncode == -signal.SIGKILL
    if child_dies_too:
        os.killpg(_checkpoint(root)["b"]["pid"], signal.SIGKILL)
    assert _checkpoint(root)["b"]["status"] == "running"
    resumed = _parent(root, "--resume")
    stdout, stderr = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, stderr
    assert stdout.strip() == "success"
    finished, started = by_step(root), by_step(root, "started.log")
    assert finished == {"a": 1, "b": 1, "c": 1}  # a never redone
    # The orphaned child of b finished and was adopted; only a killed one is rerun.
    assert started == {"a": 1, "b": 2 if child_dies_too else 1, "c": 1}
    cp = _checkpoint(root)
    assert cp["b"]["adopted"] is (not child_dies_too)
    assert all(cp[k]["status"] == "success" for k in "abc")


def test_resume_of_a_finished_chain_runs_nothing(tmp_path: Path) -> None:
    root = tmp_path / "p"
    wf = load_workflow(write(root, [step("a"), step("b")]))
    execute_chain(wf, executor=LocalProcessExecutor(command=command))
    again = execute_chain(wf, resume=True, executor=LocalProcessExecutor(command=command))
    assert again.status == "success" and sorted(again.resumed) == ["a", "b"]
    assert by_step(root) == {"a": 1, "b": 1}


def test_cli_chain_errors_are_one_line(tmp_path: Path) -> None:
    # in process: the workflow is refused (or only read) before any step starts
    path = write(tmp_path, [step("a"), step("a")])
    out = personae_cli("chain", "run", str(path), cwd=tmp_path)
    assert out.returncode == 2  # a mistake in the workflow file: usage, nothing ran
    assert out.stderr.strip().startswith("personae: error:") and "duplicate step id" in out.stderr
    assert "Traceback" not in out.stderr
    status = personae_cli("chain", "status", str(write(tmp_path, [step("a")])), cwd=tmp_path)
    assert status.returncode == 0 and "not started" in status.stdout


def test_parent_program_runs_a_workflow(tmp_path: Path) -> None:
    (tmp_path / "w.yaml").write_text("name: one\nsteps:\n  - {id: a, persona: p, task: go}\n")
    done = subprocess.run(
        [sys.executable, str(PARENT), str(tmp_path / "w.yaml")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "success"
    assert (tmp_path / ".personae" / "chains" / "one" / "report.md").exists()
