"""Ray vs the local executor: a fan-out of scripted steps, and the per-job overhead.

Run: ``python bench/bench_ray.py [--steps 64] [--trivial 64] [--slots 2]``
(needs ``personae[ray]``). Prints a table and writes ``bench/results/ray.json``.

Two measurements, each on the local executor (child processes on a thread pool)
and on Ray (a private local cluster with ``--slots`` CPUs, one CPU per job):

* **fan-out**: a chain whose one stage runs ``--steps`` real ``personae run``
  children on the SCRIPTED replay server (a loopback server replaying a scenario;
  not a real language model): wall time, CPU of this driver, and CPU of every
  process under it: local children (``getrusage``), or the Ray cluster's
  processes with what their workers' children used (``/proc``, just before the
  cluster shuts down; the cluster's start-up is part of it).
* **trivial jobs**: ``--trivial`` batch jobs whose child prints its final event
  and exits, so the time per job is the executor's own cost plus one Python start.
  Overhead per job = wall x slots / jobs; Ray's added overhead is its figure minus
  the local one.

The load average (from ``os.getloadavg``) is recorded before and after: on a
shared machine the figures move with it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from personae.batch.engine import BatchOptions, run_batch  # noqa: E402
from personae.batch.job import RunCommand  # noqa: E402
from personae.batch.progress import Progress  # noqa: E402
from personae.workflow.chain import execute_chain  # noqa: E402
from personae.workflow.executors import Executor, LocalProcessExecutor  # noqa: E402
from personae.workflow.ray_executor import RayExecutor  # noqa: E402
from personae.workflow.spec import load_workflow  # noqa: E402

PERSONA = (
    "---\nname: dev\ndescription: Reads the sample project.\ntools: [read_file]\n---\n"
    "You are dev.\n"
)
OK = {"approved": True, "requirements_met": True, "issues": [],
      "completion_signal": {"confidence": "high", "progress_made": True}}  # fmt: skip
SCENARIO = {
    "description": "one subtask: read config.yaml, report (scripted)",
    "rules": [
        {"when": {"role": "manager", "last_contains": "Report"},
         "output": {"subtasks": [{"description": "Read config"}]}},
        {"when": {"role": "worker", "tool": "read_file", "last_contains": "Read config"},
         "tool_calls": [{"name": "read_file", "args": {"path": "config.yaml"}}]},
        {"when": {"role": "worker"}, "text": "config.yaml: port 8081"},
        {"when": {"role": "validator"}, "output": OK},
        {"when": {"role": "manager"}, "text": "port 8081"},
    ],
}  # fmt: skip
TRIVIAL = (
    "import json, sys; print(json.dumps({'run_id': 'r', 'kind': 'final', "
    "'message': sys.argv[-1], 'data': {'status': 'done'}}))"
)


def _project(root: Path, steps: int) -> Path:
    (root / ".personae" / "personas").mkdir(parents=True)
    (root / ".personae" / "personas" / "dev.md").write_text(PERSONA)
    (root / "config.yaml").write_text("port: 8081\n")
    (root / "scenario.yaml").write_text(yaml.safe_dump(SCENARIO))
    group = [
        {"id": f"s{i:02}", "persona": "dev", "task": f"Report the port ({i})",
         "model": f"scripted:{root / 'scenario.yaml'}"}
        for i in range(steps)
    ]  # fmt: skip
    body = {
        "name": "fan",
        "defaults": {"timeout": 600, "retries": 0},
        "steps": [{"parallel": group}],
    }
    (root / "workflow.yaml").write_text(yaml.safe_dump(body))
    return root / "workflow.yaml"


def _cpu(who: int) -> float:
    use = resource.getrusage(who)
    return use.ru_utime + use.ru_stime


def tree_cpu(root: int) -> float:
    """CPU seconds of every live descendant of ``root``, with the children each has reaped
    (``/proc/PID/stat`` utime+stime+cutime+cstime): a Ray cluster's processes and, through
    its workers, the ``personae run`` children they ran."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = sum(int(f) for f in fields[11:15]) / tick
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        kids = [p for p, parent in parents.items() if parent == pid]
        total += sum(times[k] for k in kids)
        todo += kids
    return total


def _measure(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    self0, kids0 = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    facts = work()
    wall = time.perf_counter() - start
    self1, kids1 = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    cluster = facts.pop("cluster_cpu_s", None)
    return {
        "wall_s": round(wall, 2),
        "driver_cpu_s": round(self1 - self0, 2),
        "children_cpu_s": round(cluster if cluster is not None else kids1 - kids0, 2),
        **facts,
    }


def _close(runner: Any, facts: dict[str, Any]) -> None:
    """Shut a private Ray cluster down, after taking its processes' CPU."""
    if isinstance(runner, RayExecutor):
        facts["cluster_cpu_s"] = tree_cpu(os.getpid())
        runner.close()


def _executor(kind: str, slots: int) -> Any:
    return LocalProcessExecutor(tie=True) if kind == "local" else RayExecutor(num_cpus=slots)


def fan_out(kind: str, root: Path, steps: int, slots: int) -> dict[str, Any]:
    wf = load_workflow(_project(root / kind, steps))
    env_pwd = os.environ.pop("PWD", None)  # see the note in the report: PWD is redacted

    def work() -> dict[str, Any]:
        runner = _executor(kind, slots)
        started = time.perf_counter()
        if isinstance(runner, RayExecutor):
            runner.connect()
        ready = time.perf_counter() - started
        facts: dict[str, Any] = {"startup_s": round(ready, 2)}
        try:
            out = execute_chain(
                wf, executor=runner, concurrency=slots if kind == "local" else steps
            )
        finally:
            _close(runner, facts)
        job_s = sorted(s.duration for s in out.steps.values())
        facts["ok"] = sum(s.status == "success" for s in out.steps.values())
        facts["median_step_s"] = round(job_s[len(job_s) // 2], 2)
        return facts

    try:
        return _measure(work)
    finally:
        if env_pwd is not None:
            os.environ["PWD"] = env_pwd


def trivial(kind: str, root: Path, jobs: int, slots: int) -> dict[str, Any]:
    folder = root / f"trivial-{kind}"
    folder.mkdir()
    tasks = folder / "tasks.jsonl"
    tasks.write_text(
        "".join(json.dumps({"id": f"j{i}", "task": f"job {i}"}) + "\n" for i in range(jobs))
    )
    opts = BatchOptions(cwd=folder, concurrency=slots if kind == "local" else jobs, retries=0,
                        command=RunCommand(prefix=(sys.executable, "-c", TRIVIAL)))  # fmt: skip
    sink = open(os.devnull, "w")  # noqa: SIM115

    def work() -> dict[str, Any]:
        runner: Executor = _executor(kind, slots)
        if isinstance(runner, RayExecutor):
            runner.connect()  # startup is not part of the per-job figure
        facts: dict[str, Any] = {}
        try:
            start = time.perf_counter()
            out = run_batch(tasks, opts, executor=runner, progress=Progress("plain", sink, sink))
            wall = time.perf_counter() - start
        finally:
            _close(runner, facts)
        return {**facts, "ok": out.ok, "jobs_wall_s": round(wall, 2),
                "per_job_ms": round(wall * slots / jobs * 1000, 1)}  # fmt: skip

    return _measure(work)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--trivial", type=int, default=64)
    parser.add_argument("--slots", type=int, default=2)
    args = parser.parse_args()
    load_before = os.getloadavg()
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-ray-") as tmp:
        for kind in ("local", "ray"):
            rows[f"trivial/{kind}"] = trivial(kind, Path(tmp), args.trivial, args.slots)
        for kind in ("local", "ray"):
            rows[f"fan-out/{kind}"] = fan_out(kind, Path(tmp), args.steps, args.slots)
    load_after = os.getloadavg()
    added = rows["trivial/ray"]["per_job_ms"] - rows["trivial/local"]["per_job_ms"]
    print(f"{'run':<16}{'wall s':>8}{'driver CPU s':>14}{'children CPU s':>16}  notes")
    for name, r in rows.items():
        notes = {
            k: v for k, v in r.items() if k not in ("wall_s", "driver_cpu_s", "children_cpu_s")
        }
        print(
            f"{name:<16}{r['wall_s']:>8}{r['driver_cpu_s']:>14}{r['children_cpu_s']:>16}  {notes}"
        )
    print(f"Ray's added overhead per job: {added:.1f} ms (slots {args.slots})")
    print(f"load average before {load_before}, after {load_after}")
    body = {
        "benchmark": "bench_ray", "steps": args.steps, "trivial_jobs": args.trivial,
        "slots": args.slots, "rows": rows, "ray_added_overhead_per_job_ms": round(added, 1),
        "load_average_before": load_before, "load_average_after": load_after,
        "cpus": os.cpu_count(), "python": platform.python_version(),
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }  # fmt: skip
    out = ROOT / "bench" / "results" / "ray.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(body, indent=2) + "\n")
    print(f"written: {out}")


if __name__ == "__main__":
    main()
