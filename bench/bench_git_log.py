"""What recent commits cost a turn, next to a plain ``git log``.

Run: .venv/bin/python bench/bench_git_log.py [--turns N] [--ballast-mb M ...] [--out FILE]

The sized project of the tests (40 commits) with 300 more. Each turn makes a new
commit first (untimed, so ``HEAD`` moved as it does while an agent works), then
times, one after the other in one process, CPU time (this process and its
children) and wall time:

- ``plain git log``: ``subprocess.run`` of the same ``git log`` command the
  snapshot runs, what a caller would write instead;
- ``snapshot, no git log``: ``Snapshot.build`` for the builder role with
  ``include_git_log=False``, the baseline of the two rows below;
- ``snapshot, builder (HEAD moved)``: the same build with the log: the builder's
  profile shows recent commits, so the log is read;
- ``snapshot, builder (HEAD same)``: the same build again, ``HEAD`` unmoved;
- ``snapshot, team roles``: the build for the manager, worker and validator
  (none shows recent commits) with ``include_git_log`` left on.

The goal: the log adds at most 2 ms to a turn beyond a plain ``git log``
(``added``: builder's time minus the baseline's, per turn, then the mean and
median). Every turn's builder snapshot must hold the new commit and the team
roles' none: a stale or extra log fails the run. Repeated with the process
holding ``--ballast-mb`` of touched memory (an agent process is large; a spawn
that copies its memory pays for it). Prints a table and writes JSON to
``bench/results/git_log.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from _project_files import sized_project  # noqa: E402
from personae.context import Snapshot  # noqa: E402

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}
PLAIN = [
    "git", "--no-pager", "log", "-n15", "--no-merges", "--date=short",
    "--pretty=format:- %ad %s (%h)",
]  # fmt: skip
TEAM = ("manager", "worker", "validator")
SIDES = (
    "plain git log",
    "snapshot, no git log",
    "snapshot, builder (HEAD moved)",
    "snapshot, builder (HEAD same)",
    "snapshot, team roles",
)


def _cpu() -> float:
    """CPU seconds of this process and its waited-for children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """``fn()``'s result, CPU ms and wall ms."""
    c0, w0 = _cpu(), time.perf_counter()
    got = fn()
    return got, (_cpu() - c0) * 1e3, (time.perf_counter() - w0) * 1e3


def _commit(repo: Path, message: str) -> None:
    subprocess.run(
        ["git", "commit", "-q", "--allow-empty", "-m", message],
        cwd=repo, check=True, env={**os.environ, **GIT_ENV},
    )  # fmt: skip


def _build(repo: Path, roles: tuple[str, ...], *, log: bool) -> Snapshot:
    return Snapshot.build(repo, task="profile-page", roles=roles, include_git_log=log)


def run(repo: Path, turns: int, label: str) -> dict[str, Any]:
    """One series of ``turns`` turns; raises when a snapshot's log is stale or extra."""
    cpu: dict[str, list[float]] = {s: [] for s in SIDES}
    wall: dict[str, list[float]] = {s: [] for s in SIDES}
    added_cpu, added_wall = [], []
    for t in range(turns + 3):  # the first three warm the file reads: not kept
        subject = f"{label} turn {t}"
        _commit(repo, subject)
        plain = _timed(
            lambda: subprocess.run(PLAIN, cwd=repo, capture_output=True, text=True, check=False)
        )
        base = _timed(lambda: _build(repo, ("builder",), log=False))
        moved = _timed(lambda: _build(repo, ("builder",), log=True))
        same = _timed(lambda: _build(repo, ("builder",), log=True))
        team = _timed(lambda: _build(repo, TEAM, log=True))
        if subject not in plain[0].stdout:
            raise SystemExit(f"plain git log lacks the new commit at turn {t}")
        for name, got in (("HEAD moved", moved[0]), ("HEAD same", same[0])):
            if subject not in got.texts.get("git_log", ""):
                raise SystemExit(f"the builder's snapshot ({name}) lacks commit {subject!r}")
        if "git_log" in team[0].texts or "git_log" in base[0].texts:
            raise SystemExit(f"a snapshot that shows no recent commits read them at turn {t}")
        if t < 3:
            continue
        for side, got in zip(SIDES, (plain, base, moved, same, team), strict=True):
            cpu[side].append(got[1])
            wall[side].append(got[2])
        added_cpu.append(moved[1] - base[1])
        added_wall.append(moved[2] - base[2])
    rows = {
        side: {
            "cpu_ms_mean": statistics.fmean(cpu[side]),
            "cpu_ms_median": statistics.median(cpu[side]),
            "wall_ms_mean": statistics.fmean(wall[side]),
            "wall_ms_median": statistics.median(wall[side]),
        }
        for side in SIDES
    }
    rows["added by the log (builder)"] = {
        "cpu_ms_mean": statistics.fmean(added_cpu),
        "cpu_ms_median": statistics.median(added_cpu),
        "wall_ms_mean": statistics.fmean(added_wall),
        "wall_ms_median": statistics.median(added_wall),
    }
    plain_row, added = rows["plain git log"], rows["added by the log (builder)"]
    return {
        "turns": turns,
        "rows": rows,
        "over_plain_wall_ms_mean": added["wall_ms_mean"] - plain_row["wall_ms_mean"],
        "over_plain_wall_ms_median": added["wall_ms_median"] - plain_row["wall_ms_median"],
        "over_plain_cpu_ms_mean": added["cpu_ms_mean"] - plain_row["cpu_ms_mean"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=60, help="timed turns per series")
    ap.add_argument(
        "--ballast-mb", type=int, nargs="+", default=[0, 1024],
        help="touched memory the process holds during a series (one series each)",
    )  # fmt: skip
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "git_log.json")
    args = ap.parse_args()
    if args.turns < 1:
        ap.error("--turns: give at least 1")
    if any(mb < 0 for mb in args.ballast_mb):
        ap.error("--ballast-mb: give sizes of 0 or more")
    series: dict[str, Any] = {}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        repo = sized_project(Path(tmp) / "p")
        for i in range(300):
            _commit(repo, f"history {i}")
        for mb in args.ballast_mb:
            ballast = bytearray(mb << 20)
            for i in range(0, len(ballast), 4096):  # touch every page
                ballast[i] = 1
            series[f"{mb} MB"] = run(repo, args.turns, f"{mb}MB")
            del ballast
    load_after = os.getloadavg()
    print(
        f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after; "
        f"{args.turns} turns per series, a new commit before each; ms per turn"
    )
    print(f"{'process holds / side':<44}{'cpu mean':>9}{'median':>8}{'wall mean':>10}{'median':>8}")
    for name, s in series.items():
        for side, r in s["rows"].items():
            print(
                f"{name + ' / ' + side:<44}{r['cpu_ms_mean']:>9.2f}{r['cpu_ms_median']:>8.2f}"
                f"{r['wall_ms_mean']:>10.2f}{r['wall_ms_median']:>8.2f}"
            )
        print(
            f"{name}: the log adds {s['over_plain_wall_ms_mean']:+.2f} ms wall (mean; median "
            f"{s['over_plain_wall_ms_median']:+.2f}) to a turn beyond a plain git log (goal: "
            "at most +2 ms)"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    out = {"load_average": [load_before, load_after], "series": series}
    args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
