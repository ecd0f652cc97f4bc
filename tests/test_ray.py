"""The Ray executor on a real local Ray cluster: chains with fan-out, batches, kill, Ctrl-C.

One cluster for the whole module (2 CPUs, a custom resource, dashboard and usage
reporting off, bound to the loopback interface), started by ``ray.init`` in this
process; driver subprocesses join it with ``--address``. If Ray cannot start, the
tests fail (they are never skipped).
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from _batch_support import (
    STANDIN,
    interrupt,
    kill_and_restart,
    outcome,
    processes_mentioning,
    rows,
    scripted_server,
    write_tasks,
)
from _helpers import dev_project, free_port, read_config_scenario, run_personae
from personae.batch.engine import BatchOptions, run_batch
from personae.batch.job import RunCommand
from personae.batch.progress import Progress
from personae.errors import UsageError
from personae.models.scripted import ScriptedServer
from personae.workflow.chain import ChainOutcome, execute_chain
from personae.workflow.executors import Executor, LocalProcessExecutor
from personae.workflow.ray_executor import LOCAL_CLUSTER_ENV, RayExecutor
from personae.workflow.spec import load_workflow


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    """A real local Ray cluster for this module's tests; yields its GCS address. Stopped after
    them: an idle cluster still costs about 3 % of a core, and the run goes on for minutes."""
    for name, value in LOCAL_CLUSTER_ENV.items():  # before ray is imported
        os.environ[name] = value
    try:
        import ray
    except ImportError:
        pytest.fail("Ray is not installed: run scripts/setup.d/70-ray.sh (personae[ray])")
    try:
        ray.init(
            num_cpus=2, resources={"personae_slot": 2}, include_dashboard=False,
            log_to_driver=False, configure_logging=False,
        )  # fmt: skip
    except Exception as exc:
        pytest.fail(f"Ray could not start a local cluster: {type(exc).__name__}: {exc}")
    yield str(ray.get_runtime_context().gcs_address)
    ray.shutdown()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ScriptedServer]:
    srv = scripted_server(tmp_path)
    yield srv
    srv.stop()


def test_cluster_is_local_and_on_loopback_only(ray_cluster: str) -> None:
    ray: Any = importlib.import_module("ray")

    assert ray_cluster.startswith("127.0.0.1:")
    assert ray.cluster_resources()["CPU"] == 2
    assert os.environ["RAY_USAGE_STATS_ENABLED"] == "0"


# --- chains -----------------------------------------------------------------------------


def _chain_project(tmp_path: Path) -> Path:
    """Fan-out of two real `personae run` steps on the scripted server, then a report step
    whose scripted answer only matches when both results were handed over."""
    report = read_config_scenario("REPORT north+south", description="report (scripted)")
    report["steps"][0]["when"]["contains"] = "NORTH-ANSWER"
    root = dev_project(
        tmp_path,
        {
            "north": read_config_scenario("NORTH-ANSWER", description="north (scripted)"),
            "south": read_config_scenario("SOUTH-ANSWER", description="south (scripted)"),
            "report": report,
        },
    )

    def step(sid: str, **extra: Any) -> dict[str, Any]:
        model = f"scripted:{tmp_path / f'{sid}.yaml'}"
        return {"id": sid, "persona": "dev", "task": f"Report on {sid}", "model": model, **extra}

    steps = [
        {"parallel": [step("north", num_cpus=1, resources={"personae_slot": 1}), step("south")]},
        step("report", inputs=["north", "south"]),
    ]
    (root / "workflow.yaml").write_text(
        yaml.safe_dump({"name": "fan", "defaults": {"timeout": 120, "retries": 0}, "steps": steps})
    )
    return root


def _facts(out: ChainOutcome) -> dict[str, tuple[Any, ...]]:
    return {
        k: (s.status, s.output, tuple(s.artifacts), tuple(s.next_steps))
        for k, s in out.steps.items()
    }


def test_chain_fan_out_on_ray_matches_local_and_resumes(ray_cluster: str, tmp_path: Path) -> None:
    root = _chain_project(tmp_path)
    wf = load_workflow(root / "workflow.yaml")
    local = execute_chain(wf, executor=LocalProcessExecutor(), state_dir=tmp_path / "local")
    starts: list[str] = []
    with RayExecutor() as ray_executor:  # joins the session's cluster, leaves it running
        on_ray = execute_chain(
            wf, executor=ray_executor, state_dir=tmp_path / "ray",
            on_event=lambda key, msg: starts.append(key) if msg.startswith("start") else None,
        )  # fmt: skip
        assert local.status == "success", local.steps
        assert on_ray.status == "success", on_ray.steps
        assert _facts(on_ray) == _facts(local)
        assert on_ray.steps["report"].output == "REPORT north+south"
        handover = json.loads((tmp_path / "ray" / "handovers" / "report.json").read_text())
        passed = handover["artifacts"]["data"]["inputs"]
        assert passed["north"]["output"] == "NORTH-ANSWER"
        assert passed["south"]["output"] == "SOUTH-ANSWER"
        assert sorted(starts) == ["north", "report", "south"]
        runs = json.loads(run_personae("runs", "list", "--json", "--limit", "50", cwd=root).stdout)
        again = execute_chain(wf, resume=True, executor=ray_executor, state_dir=tmp_path / "ray")
    assert sorted(again.resumed) == ["north", "report", "south"]  # nothing is run again
    after = json.loads(run_personae("runs", "list", "--json", "--limit", "50", cwd=root).stdout)
    assert len(runs) == len(after) == 6


def _slow_chain(
    tmp_path: Path, ray_cluster: str, step: str, answer: str, pause: float
) -> tuple[Path, list[str], dict[str, str]]:
    """The chain project (:func:`_chain_project`) with step ``step``'s scripted ``answer``
    streamed in pieces ``pause`` s apart; the `chain run` driver command on the Ray cluster,
    and its environment (this one without PWD)."""
    root = _chain_project(tmp_path)
    slow = read_config_scenario(answer, description=f"{step} (scripted, slow)")
    slow["steps"][-1]["stream_pause"] = pause
    (tmp_path / f"{step}.yaml").write_text(yaml.safe_dump(slow))
    env = {k: v for k, v in os.environ.items() if k != "PWD"}
    cmd = [sys.executable, "-m", "personae", "chain", "run", "workflow.yaml", "--executor",
           "ray", "--address", ray_cluster, "--json"]  # fmt: skip
    return root, cmd, env


def _runs(root: Path, task: str) -> list[dict[str, Any]]:
    listed = run_personae("runs", "list", "--json", "--limit", "50", cwd=root)
    return [r for r in json.loads(listed.stdout or "[]") if r["task"] == task]


def test_chain_driver_killed_on_ray_resumes_without_redoing_finished_steps(
    ray_cluster: str, tmp_path: Path
) -> None:
    root, cmd, env = _slow_chain(tmp_path, ray_cluster, "report", "REPORT north+south", 2.0)
    driver = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, text=True)
    assert driver.stdout is not None
    for line in driver.stdout:
        event = json.loads(line)
        if event.get("step") == "report" and event["message"].startswith("start"):
            break
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not _runs(root, "Report on report"):
        time.sleep(0.5)  # until the report step's child has stored its run: it is at work
    driver.kill()
    driver.wait()
    again = subprocess.run(
        [*cmd, "--resume"], cwd=root, env=env, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    done = json.loads(again.stdout.splitlines()[-1])
    assert sorted(done["resumed"]) == ["north", "south"]
    assert [s["status"] for s in done["steps"]] == ["success"] * 3
    assert len(_runs(root, "Report on north")) == len(_runs(root, "Report on south")) == 1
    reports = _runs(root, "Report on report")  # killed with its driver, then run again
    statuses = [r["status"] for r in reports]
    assert len(statuses) == 2 and statuses.count("done") == 1  # the killed one: crashed


def test_chain_ctrl_c_on_ray_kills_the_running_step(ray_cluster: str, tmp_path: Path) -> None:
    root, cmd, env = _slow_chain(tmp_path, ray_cluster, "north", "NORTH-ANSWER", 5.0)
    driver = subprocess.Popen(
        cmd, cwd=root, env=env, stdout=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not _runs(root, "Report on north"):
        time.sleep(0.5)  # the north step's child is at work (its run is stored)
    assert processes_mentioning(str(root)) != []
    driver.send_signal(signal.SIGINT)
    assert driver.wait(timeout=60) == 130
    deadline = time.monotonic() + 20
    while processes_mentioning(str(root)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_mentioning(str(root)) == []  # no child, no tool outlives the run
    checkpoint = json.loads((root / ".personae/chains/fan/checkpoint.json").read_text())
    assert checkpoint["steps"]["report"]["status"] == "pending"  # never started


def test_step_resources_no_node_has_fail_at_once(ray_cluster: str, tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    step = {"id": "a", "persona": "dev", "task": "x", "resources": {"nowhere": 1}}
    path.write_text(yaml.safe_dump({"name": "x", "steps": [step]}))
    with RayExecutor() as ray_executor:
        out = execute_chain(load_workflow(path), executor=ray_executor)
    assert out.status == "failure"
    assert out.steps["a"].error == "no node of the Ray cluster offers CPU=1, nowhere=1"


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"num_cpus": 0}, "num_cpus"),
        ({"resources": {"CPU": 2}}, "use num_cpus"),
        ({"resources": {"bad name": 1}}, "resource 'bad name'"),
        ({"resources": {"gpu_box": -1}}, "amount must be > 0"),
    ],
)
def test_bad_step_resources_refused(tmp_path: Path, extra: dict[str, Any], needle: str) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "steps": [{"id": "a", "persona": "p",
                                                             "task": "t", **extra}]}))  # fmt: skip
    with pytest.raises(UsageError, match=r"w\.yaml") as err:
        load_workflow(path)
    assert needle in str(err.value)


# --- batches ----------------------------------------------------------------------------


def _batch(root: Path, tasks: Path, executor: Executor, out: Path, command: RunCommand) -> None:
    opts = BatchOptions(cwd=root, out=out, concurrency=4, timeout=120, retries=0,
                        num_cpus=0.5, command=command)  # fmt: skip
    sink = open(os.devnull, "w")  # noqa: SIM115
    result = run_batch(tasks, opts, executor=executor, progress=Progress("plain", sink, sink))
    assert result.failed == 0


def test_batch_of_200_on_ray_matches_local(
    ray_cluster: str, tmp_path: Path, server: ScriptedServer
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    ids = write_tasks(tasks, 200, server.base_url)
    _batch(tmp_path, tasks, LocalProcessExecutor(tie=True), tmp_path / "local.jsonl", STANDIN)
    with RayExecutor() as ray_executor:
        _batch(tmp_path, tasks, ray_executor, tmp_path / "ray.jsonl", STANDIN)
    local, on_ray = outcome(tmp_path / "local.jsonl"), outcome(tmp_path / "ray.jsonl")
    assert sorted(on_ray) == ids
    assert on_ray == local
    assert on_ray["t007"] == ("success", "ODD | p1") and on_ray["t198"] == ("success", "EVEN | p0")
    assert all(r["host"] and r["run_id"] for r in rows(tmp_path / "ray.jsonl"))
    assert len(server.requests) == 400  # every run asked the scripted server


def test_batch_of_real_team_runs_on_ray_matches_local(ray_cluster: str, tmp_path: Path) -> None:
    root = dev_project(tmp_path, {"one": read_config_scenario("ANSWER 8081", description="b")})
    spec = f"scripted:{tmp_path / 'one.yaml'}"
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(
        json.dumps({"id": f"r{i}", "task": f"What port? {i}", "persona": "dev", "model": spec})
        + "\n" for i in range(2)
    ))  # fmt: skip
    _batch(root, tasks, LocalProcessExecutor(tie=True), tmp_path / "local.jsonl", RunCommand())
    with RayExecutor() as ray_executor:
        _batch(root, tasks, ray_executor, tmp_path / "ray.jsonl", RunCommand())
    on_ray = outcome(tmp_path / "ray.jsonl")
    assert on_ray == outcome(tmp_path / "local.jsonl")
    assert on_ray == {"r0": ("success", "ANSWER 8081"), "r1": ("success", "ANSWER 8081")}


def test_ray_batch_driver_killed_and_restarted_finishes_without_redoing(
    ray_cluster: str, tmp_path: Path, server: ScriptedServer
) -> None:
    kill_and_restart(tmp_path, server, "ray", ray_cluster)


def test_ray_batch_ctrl_c_cancels_and_leaves_no_process(
    ray_cluster: str, tmp_path: Path, server: ScriptedServer
) -> None:
    interrupt(tmp_path, server, "ray", ray_cluster)


def test_private_cluster_started_and_shut_down_by_the_cli(tmp_path: Path) -> None:
    """Without --address the CLI starts its own loopback cluster and stops it at the end."""
    # A task that fails when it runs: nothing listens at its model's address (the persona
    # and the model are valid, so the batch's checks before the start let it through).
    root = dev_project(tmp_path, {})
    tasks = root / "tasks.jsonl"
    task = {"task": "x", "persona": "dev", "model": "openai-compatible:nothing-listens"}
    tasks.write_text(json.dumps(task) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "PWD"}
    env["OPENAI_BASE_URL"] = f"http://127.0.0.1:{free_port()}/v1"
    done = run_personae("batch", str(tasks), "--executor", "ray", "--retries", "0",
                        cwd=root, env=env, timeout=180)  # fmt: skip
    assert done.returncode == 3, done.stderr  # the task failed, no crash
    row = rows(root / "tasks.results.jsonl")[0]
    assert row["status"] == "failure" and "exited with code" in row["error"]
    assert processes_mentioning(str(tmp_path)) == []


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["chain", "run", "w.yaml", "--executor", "slurm"], "--executor: unknown executor 'slurm'"),
        (["batch", "tasks.jsonl", "--executor", "slurm"], "--executor: unknown executor 'slurm'"),
        (["batch", "tasks.jsonl", "--address", "127.0.0.1:1"], "--address needs --executor ray"),
    ],
)
def test_executor_options_checked(tmp_path: Path, args: list[str], needle: str) -> None:
    (tmp_path / ".personae").mkdir()  # a project: outside one, batch and chain refuse first
    (tmp_path / "w.yaml").write_text("name: x\nsteps:\n  - {id: a, persona: researcher, task: t}\n")
    (tmp_path / "tasks.jsonl").write_text('{"task": "t"}\n')
    done = run_personae(*args, cwd=tmp_path, timeout=60)
    assert done.returncode == 2 and needle in done.stderr, done.stderr  # usage: nothing ran
    assert not (tmp_path / "tasks.results.jsonl").exists()


def test_chain_steps_on_ray_link_to_the_run_that_started_them(
    ray_cluster: str, tmp_path: Path
) -> None:
    """A step run by a Ray task links to the driver's run and gets what it had left."""
    from personae.lineage import Budget, Running, running

    root = dev_project(tmp_path, {"one": read_config_scenario("ONE-ANSWER", description="1")})
    step = {"id": "one", "persona": "dev", "task": "Report on one",
            "model": f"scripted:{tmp_path / 'one.yaml'}"}  # fmt: skip
    (root / "workflow.yaml").write_text(
        yaml.safe_dump(
            {"name": "solo", "defaults": {"timeout": 120, "retries": 0}, "steps": [step]}
        )
    )
    driver = Running(run_id="run-20260101-000000-d71e00", trace_id="ab" * 16,
                     span_id="cd" * 8, budget_left=lambda: Budget(calls=40))  # fmt: skip
    with RayExecutor() as ray_executor, running(driver, process_wide=True):
        done = execute_chain(load_workflow(root / "workflow.yaml"), executor=ray_executor,
                             state_dir=tmp_path / "ray")  # fmt: skip
    assert done.status == "success", done.steps
    (run,) = json.loads(run_personae("runs", "list", "--json", cwd=root).stdout)
    assert run["parent_run_id"] == driver.run_id
    assert (run["trace_id"], run["parent_span_id"]) == (driver.trace_id, driver.span_id)
    assert run["budget"] == {"calls": 40}
