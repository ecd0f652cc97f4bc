"""The ``run_shell`` sandbox: bubblewrap (``bwrap``) around every command, when it works.

Inside the sandbox a command sees:

* the workspace read-write (the only place its writes reach the disk);
* the rest of the file system read-only, with a private, empty ``/tmp``
  (discarded when the command ends) and fresh ``/dev`` and ``/proc``;
* the user's home folder hidden (an empty folder) except the paths the
  project config or the persona allow (read-only);
* no network (its own network namespace with only a loopback device) unless
  allowed;
* its own PID namespace and session, and ``--die-with-parent``: when the
  command's supervisor dies, every process inside dies with it, including
  those that left the process group.

``mode`` is ``auto`` (sandbox when bubblewrap works, else run unsandboxed with
one warning per run), ``required`` (refuse to run without it) or ``off``.
Bubblewrap that is installed but cannot create namespaces (a container without
user namespaces, for example) counts as unavailable; the probe runs once per
process.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "INSTALL_HINT",
    "SandboxStatus",
    "bwrap_status",
    "expand_allowed",
    "sandbox_argv",
]

INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt install bubblewrap; Fedora: dnf install bubblewrap)"
)
"""How to get the sandbox, for warnings and ``doctor``."""


@dataclass(frozen=True)
class SandboxStatus:
    """Whether the sandbox can be used here, and why not."""

    bwrap: str | None
    """Path of a working ``bwrap``, or ``None``."""
    reason: str
    """What was found (version, or why it is unusable)."""

    @property
    def available(self) -> bool:
        """Whether commands can run sandboxed."""
        return self.bwrap is not None


@functools.cache
def bwrap_status() -> SandboxStatus:
    """Find ``bwrap`` and check that it can build a sandbox here (cached per process)."""
    found = shutil.which("bwrap")
    if found is None:
        return SandboxStatus(None, "bubblewrap (bwrap) is not installed")
    true = shutil.which("true") or "/bin/true"
    probe = [*_base_args(found, network=False), "--", true]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return SandboxStatus(None, f"bwrap at {found} cannot run: {exc}")
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["no error text"])[0]
        return SandboxStatus(None, f"bwrap at {found} cannot create a sandbox here: {first}")
    return SandboxStatus(found, f"bwrap at {found} works")


def _base_args(bwrap: str, *, network: bool) -> list[str]:
    args = [
        bwrap,
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--tmpfs", "/tmp",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--die-with-parent",
        "--new-session",
    ]  # fmt: skip
    if not network:
        args.append("--unshare-net")
    return args


def expand_allowed(paths: tuple[str, ...] | list[str], home: str) -> list[str]:
    """Absolute forms of allowed paths (``~`` is the user's home); relative ones are dropped."""
    out: list[str] = []
    for raw in paths:
        text = raw.strip()
        if text == "~" or text.startswith("~/"):
            text = home + text[1:]
        if os.path.isabs(text):
            out.append(os.path.normpath(text))
    return out


def sandbox_argv(
    argv: list[str],
    *,
    bwrap: str,
    workspace: Path,
    cwd: Path,
    network: bool = False,
    allow_paths: tuple[str, ...] | list[str] = (),
    home: str | None = None,
) -> list[str]:
    """``argv`` wrapped in a bubblewrap command line (see the module docstring)."""
    user_home = home if home is not None else os.path.expanduser("~")
    args = _base_args(bwrap, network=network)
    if user_home and os.path.isabs(user_home) and os.path.normpath(user_home) != "/":
        args += ["--tmpfs", os.path.normpath(user_home)]
    for path in expand_allowed(allow_paths, user_home):
        args += ["--ro-bind-try", path, path]
    args += ["--bind", str(workspace), str(workspace), "--chdir", str(cwd), "--", *argv]
    return args
