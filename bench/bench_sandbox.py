"""What the run_shell sandbox costs per command: plain, bare bubblewrap, and the full sandbox.

Side by side in one run, wall and CPU time (of the children) per command:

* ``plain``: the command run directly (what ``sandbox.mode: off`` does);
* ``bwrap bare``: bubblewrap with the namespaces only (the sandbox before
  capabilities, control paths and the socket rule);
* ``bwrap full``: the command line run_shell builds now (``--cap-drop ALL``,
  private /run and /var/tmp, control paths read-only with placeholders, and
  the seccomp socket rule);
* ``full, no seccomp``: the same without the rule, to isolate its cost.

CPU time is what this process's waited children used; work done inside
bubblewrap's PID namespace is reaped there and mostly not counted, so compare
wall times between the bubblewrap rows.

Two commands: ``true`` (start-up cost) and ``dd`` copying 200,000 one-byte
blocks (400,000 system calls: the filter's cost per call).

    python bench/bench_sandbox.py [--runs 15] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from personae.tools.control import Placeholders
from personae.tools.sandbox import bwrap_status, sandbox_argv
from personae.tools.seccomp import socket_filter_fd

Build = Callable[[], tuple[list[str], tuple[int, ...], Callable[[], None]]]
"""Makes one run: its argv, the descriptors to pass and what to do after it."""

COMMANDS = {
    "true": ["/bin/true"],
    "dd 400k syscalls": ["/bin/dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=200000"],
}


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def _time(build: Build, runs: int) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(runs):
        argv, fds, done = build()
        cpu0, t0 = _children_cpu(), time.perf_counter()
        subprocess.run(argv, pass_fds=fds, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)  # fmt: skip
        walls.append(time.perf_counter() - t0)
        cpus.append(_children_cpu() - cpu0)
        done()
    return statistics.median(walls) * 1000, statistics.median(cpus) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", type=Path, default=None)
    opts = parser.parse_args()
    status = bwrap_status()
    if status.bwrap is None:
        sys.exit(f"bench_sandbox: {status.reason}")
    bwrap = status.bwrap
    ws = Path(tempfile.mkdtemp(prefix="personae-bench-sbx-"))
    holder = Placeholders()
    bare_head = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                 "--tmpfs", "/tmp", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                 "--unshare-net", "--die-with-parent", "--new-session",
                 "--bind", str(ws), str(ws), "--chdir", str(ws), "--"]  # fmt: skip

    def plain(
        argv: list[str],
    ) -> Callable[[], tuple[list[str], tuple[int, ...], Callable[[], None]]]:
        return lambda: (argv, (), lambda: None)

    def bare(
        argv: list[str],
    ) -> Callable[[], tuple[list[str], tuple[int, ...], Callable[[], None]]]:
        return lambda: ([*bare_head, *argv], (), lambda: None)

    def full(
        argv: list[str], seccomp: bool
    ) -> Callable[[], tuple[list[str], tuple[int, ...], Callable[[], None]]]:
        def build() -> tuple[list[str], tuple[int, ...], Callable[[], None]]:
            lease = holder.acquire(ws)
            fds = (socket_filter_fd(),) if seccomp else ()
            wrapped = sandbox_argv(
                argv, bwrap=bwrap, workspace=ws, cwd=ws, control=lease.args,
                seccomp_fd=fds[0] if fds else None,
            )  # fmt: skip

            def done() -> None:
                for fd in fds:
                    os.close(fd)
                holder.release(lease)

            return wrapped, fds, done

        return build

    rows = []
    for label, argv in COMMANDS.items():
        for mode, build in (("plain", plain(argv)), ("bwrap bare", bare(argv)),
                            ("full, no seccomp", full(argv, False)),
                            ("bwrap full", full(argv, True))):  # fmt: skip
            wall, cpu = _time(build, opts.runs)
            rows.append({"command": label, "mode": mode, "wall_ms": round(wall, 2),
                         "cpu_ms": round(cpu, 2)})  # fmt: skip
    shutil.rmtree(ws, ignore_errors=True)
    print(f"run_shell sandbox cost per command (median of {opts.runs}; load {os.getloadavg()})")
    print(f"{'command':<18} {'mode':<18} {'wall ms':>9} {'cpu ms':>9}")
    for r in rows:
        print(f"{r['command']:<18} {r['mode']:<18} {r['wall_ms']:>9.2f} {r['cpu_ms']:>9.2f}")
    if opts.json:
        opts.json.write_text(json.dumps({"runs": opts.runs, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
