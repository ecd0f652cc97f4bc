"""Shared parts of the viewer tests: a project with stored runs, the server, Chromium.

The project is made by the real CLI (``personae demo --keep`` and ``personae
chain run`` on the bundled examples, both on the scripted replay server); the
viewer runs as a real ``personae ui`` subprocess; the browser is Debian's
Chromium driven by Playwright (never a downloaded browser).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from _helpers import run_personae

CHROMIUM = Path(os.environ.get("PERSONAE_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def cli(*args: str, cwd: Path, timeout: float = 120, env: dict[str, str] | None = None) -> str:
    """Run ``python -m personae ARGS`` in ``cwd``; fails the test (with its output) on non-zero."""
    proc = run_personae(
        *args, cwd=cwd, env={**os.environ, "COLUMNS": "120", **(env or {})}, timeout=timeout
    )
    if proc.returncode != 0:
        pytest.fail(
            f"personae {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
    return proc.stdout


DEMO_TASK = "Give me the port the service listens on and the setup steps."


def _run_id(out: str) -> str:
    return next(w.rstrip(".,;") for w in out.split() if w.startswith("run-"))


def make_project(folder: Path) -> tuple[str, str]:
    """The demo project with its stored run, the same task again on a budget too small for
    its contexts (sections cut and dropped), and the chain example run in it.

    Returns the ids of the demo run and of the tight-budget run.
    """
    out = cli("demo", "--keep", str(folder), cwd=folder.parent)
    run_id = _run_id(out)
    scenario = resources.files("personae.examples") / "demo" / "scenario.yaml"
    tight = cli(
        "run", "--persona", "maintainer", "--model", f"scripted:{scenario}", DEMO_TASK,
        cwd=folder, env={"PERSONAE_BUDGET_SHARE": "0.003"},
    )  # fmt: skip
    tight_id = _run_id(tight)
    chain = Path(str(resources.files("personae.examples") / "chain"))
    for item in chain.iterdir():
        target = folder / item.name
        if item.is_dir():
            shutil.copytree(item, target, dirs_exist_ok=True)
        else:
            shutil.copy2(item, target)
    cli("chain", "run", "workflow.yaml", cwd=folder)
    return run_id, tight_id


@contextmanager
def viewer(root: Path, *extra: str, ended: list[str] | None = None) -> Iterator[str]:
    """``personae ui --port 0 --root ROOT`` as a subprocess; yields its base URL.

    On exit it is stopped with SIGINT (as Ctrl-C); ``ended`` gets its exit code and stderr.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "personae", "ui", "--port", "0", "--root", str(root), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "http://" not in line:
            proc.kill()
            _, err = proc.communicate(timeout=10)
            pytest.fail(f"personae ui did not start: {line!r} {err}")
        url = line.split()[2].rstrip("/")
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        if ended is not None and proc.stderr is not None:
            ended.extend([str(proc.returncode), proc.stderr.read()])
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def launch_browser(playwright: Any) -> Any:
    """Debian's Chromium, headless; a missing binary fails the test with what to install."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"Chromium not found at {CHROMIUM}: install it with scripts/setup.d/50-chromium.sh "
            "(apt-get install chromium); the viewer tests never download a browser"
        )
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
