"""Process-lifetime helpers for tests: start ``personae`` as a real process, find the
processes a test marked (by a token in their command line) in ``/proc``, wait, reap."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _helpers import wait_until as poll_until


def marked(token: str) -> list[int]:
    """Pids of live (not zombie) processes whose command line holds ``token``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if token.encode() in cmdline and state != "Z":
            found.append(int(entry))
    return found


def settle(token: str, limit: float = 5.0) -> list[int]:
    """Marked processes still alive after up to ``limit`` seconds (then killed, for hygiene)."""
    deadline = time.monotonic() + limit
    alive = marked(token)
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = marked(token)
    for pid in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return alive


def wait_until(check: Any, limit: float = 90.0, what: str = "condition") -> None:
    """Poll ``check`` every 0.05 s until it is true (fails after ``limit`` seconds)."""
    poll_until(check, limit, interval=0.05, what=what)


def clean_env() -> dict[str, str]:
    """This environment without ``PERSONAE_*`` variables, at 120 columns."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERSONAE_")}
    env["COLUMNS"] = "120"
    return env


def start_personae(root: Path, *args: str) -> subprocess.Popen[str]:
    """``python -m personae ARGS`` in ``root``, pipes for its output, Ctrl-C at default."""
    return subprocess.Popen(
        [sys.executable, "-m", "personae", *args],
        cwd=root,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A test run started in the background inherits SIGINT ignored; Ctrl-C needs the default.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
    )


@contextlib.contextmanager
def reaped(run: subprocess.Popen[str]) -> Iterator[None]:
    """Kill and reap ``run`` on the way out if it is still running."""
    try:
        yield
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()


def new_token() -> str:
    """A random digit-only marker for the command lines of a test's processes."""
    return secrets.token_hex(4).translate(str.maketrans("abcdef", "123456"))
