"""Benchmark the CLI's start: CPU time of a fresh ``personae --help`` and its parts.

Prints a table and writes bench/results/cli_start.json. Goal: ``personae --help``
(a new process: Python start-up, imports, rendering the help) takes at most 0.25 s
of CPU (user + system). CPU, not wall time, so that a busy machine changes the
figure less; the best of several runs is the figure, the median is shown next to it.

Next to it, in the same run: a bare interpreter (the floor), the libraries the CLI
is built on (typer with its rich help), ``click`` alone with a plain help (what a
CLI without rich panels pays), and the subcommands' help (``personae run --help``).

Run: PYTHONPATH=src python bench/bench_cli_start.py [--runs 8]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "cli_start.json"
GOAL_CPU_S = 0.25

CASES: dict[str, list[str]] = {
    "personae --help": ["-m", "personae", "--help"],
    "personae run --help": ["-m", "personae", "run", "--help"],
    "personae runs --help": ["-m", "personae", "runs", "--help"],
    "python (bare interpreter)": ["-c", "pass"],
    "import personae.cli.app": ["-c", "import personae.cli.app"],
    "import typer + its rich help": ["-c", "import typer, typer.rich_utils"],
    "click alone, plain --help": [
        "-c",
        "import click\n"
        "@click.group(help='A group.')\n"
        "def g():\n    pass\n"
        "@g.command(help='A command.')\n"
        "def c():\n    pass\n"
        "g(['--help'])",
    ],
}


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"COLUMNS": "80"}
"""The children's environment: bytecode written and read, as in an installed package."""


def one_run(args: list[str]) -> tuple[float, float]:
    """CPU seconds (user + system) and wall seconds of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        timeout=60,
        check=False,
        env=ENV,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{args}: exit {done.returncode}: {done.stderr.decode()[-300:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def measure(args: list[str], runs: int) -> dict[str, Any]:
    """Best and median CPU and wall time of ``runs`` fresh processes."""
    cpus, walls = zip(*(one_run(args) for _ in range(runs)), strict=True)
    return {
        "cpu_best_s": round(min(cpus), 3),
        "cpu_median_s": round(statistics.median(cpus), 3),
        "wall_best_s": round(min(walls), 3),
        "wall_median_s": round(statistics.median(walls), 3),
        "runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=8)
    args = parser.parse_args()
    one_run(CASES["personae --help"])  # warm the file cache and the .pyc files
    load_before = os.getloadavg()
    rows = {label: measure(argv, args.runs) for label, argv in CASES.items()}
    load_after = os.getloadavg()
    head = rows["personae --help"]
    results: dict[str, Any] = {
        "goal_cpu_s": GOAL_CPU_S,
        "met": head["cpu_best_s"] <= GOAL_CPU_S,
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in load_after],
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "cases": rows,
    }
    print(
        f"CLI start (load average {load_before[0]:.2f} -> {load_after[0]:.2f}, "
        f"{os.cpu_count()} CPUs, best and median of {args.runs} fresh processes)"
    )
    print(f"{'':<32}{'cpu best':>10}{'cpu med':>10}{'wall best':>11}{'wall med':>10}")
    for label, row in rows.items():
        print(
            f"{label:<32}{row['cpu_best_s']:>10.3f}{row['cpu_median_s']:>10.3f}"
            f"{row['wall_best_s']:>11.3f}{row['wall_median_s']:>10.3f}"
        )
    verdict = "met" if results["met"] else "NOT met"
    print(f"\ngoal: personae --help <= {GOAL_CPU_S} s CPU: {verdict} ({head['cpu_best_s']} s)")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
