"""Benchmark of the tools layer: path confinement, dispatch, grep, canonical args, run_shell.

Run: ``PYTHONPATH=src python bench/bench_tools.py``. Prints a table and writes
``bench/results/tools.json``. Takes a few seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from personae.tools import ToolRefusedError, ToolRegistry, ToolSubset, Workspace, canonical_args

RESULTS = Path(__file__).parent / "results" / "tools.json"


def _time(fn: Callable[[], Any], repeat: int) -> float:
    """Median seconds per call over 5 rounds of ``repeat`` calls."""
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        rounds.append((time.perf_counter() - start) / repeat)
    return sorted(rounds)[2]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i in range(2000):
            sub = root / f"d{i % 40}"
            sub.mkdir(exist_ok=True)
            body = "".join(f"line {j} of file {i}\n" for j in range(50))
            (sub / f"f{i}.py").write_text(body + ("NEEDLE\n" if i % 100 == 0 else ""))
        ws = Workspace(root)
        subset = ToolRegistry.builtin(ws).subset()
        child = subset.narrow(["read_file"])
        loop = asyncio.new_event_loop()

        def dispatch(name: str, **args: Any) -> str:
            return loop.run_until_complete(subset.dispatch(name, args))

        args = {"path": "d1/f1.py", "offset": 1, "limit": 20, "nested": {"b": [1.0, 2], "a": "x"}}
        rows: list[tuple[str, float, str]] = [
            (
                "Workspace.resolve (relative path)",
                _time(lambda: ws.resolve("d3/f3.py"), 2000),
                "us",
            ),
            ("canonical_args (5 keys, nested)", _time(lambda: canonical_args(args), 2000), "us"),
            (
                "dispatch read_file (50-line file)",
                _time(lambda: dispatch("read_file", path="d1/f1.py"), 200),
                "us",
            ),
            ("dispatch refused (outside subset)", _time(lambda: _refuse(loop, child), 2000), "us"),
            (
                "grep NEEDLE over 2000 files",
                _time(lambda: dispatch("grep", pattern="NEEDLE"), 3),
                "ms",
            ),
            (
                "glob **/*.py over 2000 files",
                _time(lambda: dispatch("glob", pattern="**/*.py"), 3),
                "ms",
            ),
            (
                "run_shell 'true' round trip",
                _time(lambda: dispatch("run_shell", command="true"), 5),
                "ms",
            ),
            (  # the command's own 30 ms, plus what noticing its end costs
                "run_shell 'sleep 0.03' round trip",
                _time(lambda: dispatch("run_shell", command="sleep 0.03"), 5),
                "ms",
            ),
        ]
        loop.close()
    scale = {"us": 1e6, "ms": 1e3}
    print(f"{'operation':<40} {'median':>12}")
    print("-" * 53)
    for name, secs, unit in rows:
        print(f"{name:<40} {secs * scale[unit]:>9.1f} {unit}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "python": platform.python_version(),
                "machine": platform.machine(),
                "results": [
                    {"operation": n, "median_seconds": s, "unit_shown": u} for n, s, u in rows
                ],
            },
            indent=2,
        )
        + "\n"
    )
    print(f"\nwrote {RESULTS}")


def _refuse(loop: asyncio.AbstractEventLoop, child: ToolSubset) -> None:
    with contextlib.suppress(ToolRefusedError):
        loop.run_until_complete(child.dispatch("run_shell", {"command": "true"}))
    child.calls.clear()


if __name__ == "__main__":
    main()
