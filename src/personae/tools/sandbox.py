"""The ``run_shell`` sandbox: bubblewrap (``bwrap``) around every command.

Inside the sandbox a command sees:

* the workspace read-write (the only place its writes reach the disk), except
  its control paths (``.personae/``, ``.git/``, host settings and instruction
  files, :mod:`personae.tools.control`), bound read-only on top, with an
  empty read-only placeholder where one does not exist yet;
* the rest of the file system read-only, with a private, empty ``/tmp``
  (discarded when the command ends) and fresh ``/dev`` and ``/proc``;
* the user's home folder hidden (an empty folder) except the paths the
  project config or the persona allow (read-only);
* no capabilities (``--cap-drop ALL``; bubblewrap also sets no-new-privileges),
  even when personae runs as root: no mount, remount, ``mknod``, raw sockets;
* no network (its own network namespace with only a loopback device) and no
  socket outside: private, empty ``/run``, ``/var/run``, ``/var/tmp`` and
  ``/dev/shm``, and a seccomp rule that refuses every socket family but IP
  and netlink (:mod:`personae.tools.seccomp`), unless the network is allowed;
* its own PID namespace and session, and ``--die-with-parent``: when the
  command's supervisor dies, every process inside dies with it, including
  those that left the process group.

``mode`` is ``auto`` (sandbox when bubblewrap works; when it is missing or
cannot create namespaces here, an interactive run goes on unsandboxed with one
warning, an unattended one -- handover child, chain step, batch task --
refuses), ``required`` (refuse to run without it) or ``off``. The probe is
retried; only a definite answer is kept for the process, so a probe that
timed out under load never turns the sandbox off (the command is refused).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from personae.procs import UNATTENDED_ENV

__all__ = [
    "INSTALL_HINT",
    "SandboxStatus",
    "bwrap_status",
    "describe_mode",
    "expand_allowed",
    "sandbox_argv",
    "unattended",
]

INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt install bubblewrap; Fedora: dnf install bubblewrap)"
)
"""How to get the sandbox, for warnings and ``doctor``."""

PROBE_ATTEMPTS = 3
"""How often the probe is tried before it counts as failed."""


@dataclass(frozen=True)
class SandboxStatus:
    """Whether the sandbox can be used here, and why not."""

    bwrap: str | None
    """Path of a working ``bwrap``, or ``None``."""
    reason: str
    """What was found (version, or why it is unusable)."""
    transient: bool = False
    """The probe failed in a way that may pass (timed out, out of resources): never a
    reason to run unsandboxed."""

    @property
    def available(self) -> bool:
        """Whether commands can run sandboxed."""
        return self.bwrap is not None


_cache: list[SandboxStatus] = []
_cache_lock = threading.Lock()


def bwrap_status() -> SandboxStatus:
    """Find ``bwrap`` and check that it builds the full sandbox here.

    A definite answer (works; not installed; refused every time) is kept for
    the process; a probe that only timed out or hit a resource limit is tried
    again at the next call.
    """
    with _cache_lock:
        if _cache:
            return _cache[0]
        status = _probe()
        if not status.transient:
            _cache.append(status)
        return status


def _probe() -> SandboxStatus:
    found = shutil.which("bwrap")
    if found is None:
        return SandboxStatus(None, "bubblewrap (bwrap) is not installed")
    # A system path: a `true` under /tmp or the home would be hidden inside the sandbox.
    true = next((p for p in ("/usr/bin/true", "/bin/true") if os.path.exists(p)), None)
    true = true or shutil.which("true") or "/bin/true"
    last = SandboxStatus(None, f"bwrap at {found} was not probed", transient=True)
    for attempt in range(PROBE_ATTEMPTS):
        if attempt:
            time.sleep(0.2 * attempt)
        last = _probe_once(found, true)
        if last.available:
            return last
    return last


def _probe_once(found: str, true: str) -> SandboxStatus:
    # local import: seccomp is only needed once a command runs
    from personae.tools.seccomp import socket_filter_fd

    fd = socket_filter_fd()
    probe = [*_base_args(found, network=False, seccomp_fd=fd), "--", true]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=20, check=False,
                              pass_fds=(fd,))  # fmt: skip
    except subprocess.TimeoutExpired:
        return SandboxStatus(None, f"bwrap at {found} timed out in its probe", transient=True)
    except OSError as exc:
        return SandboxStatus(None, f"bwrap at {found} cannot run: {exc}", transient=True)
    finally:
        os.close(fd)
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["no error text"])[0]
        # bwrap says why; a fork or clone that ran out of resources may pass next time
        busy = "Resource temporarily unavailable" in first or "Cannot allocate" in first
        return SandboxStatus(None, f"bwrap at {found} cannot create a sandbox here: {first}",
                             transient=busy)  # fmt: skip
    return SandboxStatus(found, f"bwrap at {found} works")


def unattended() -> bool:
    """Whether this process is a run nobody watches (:data:`personae.procs.UNATTENDED_ENV`)."""
    return os.environ.get(UNATTENDED_ENV) == "1"


def describe_mode(mode: str) -> str:
    """Which ``run_shell`` mode a run with the configured ``mode`` gets here, in one line.

    ``bwrap`` (sandboxed), ``off`` (the config turns it off), ``unsandboxed``
    (``auto`` without a working bubblewrap, interactive) or ``refused``
    (commands will be refused), the last two with the reason.
    """
    if mode == "off":
        return "off (sandbox.mode: off)"
    status = bwrap_status()
    if status.available:
        return "bwrap (no capabilities, no network, no sockets outside, control paths read-only)"
    if mode == "required" or status.transient or unattended():
        return f"refused ({status.reason})"
    return f"unsandboxed ({status.reason})"


_PRIVATE = ("/run", "/var/run", "/var/tmp")
"""Folders that hold sockets and shared state: an empty tmpfs each when the network is off."""


def _base_args(bwrap: str, *, network: bool, seccomp_fd: int | None = None) -> list[str]:
    args = [
        bwrap,
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--tmpfs", "/tmp",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--cap-drop", "ALL",
    ]  # fmt: skip
    if not network:
        args.append("--unshare-net")
        for path in _PRIVATE:
            if os.path.isdir(path) and not os.path.islink(path):
                args += ["--tmpfs", path]
        args += ["--tmpfs", "/dev/shm"]
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
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
    control: list[str] | None = None,
    seccomp_fd: int | None = None,
) -> list[str]:
    """``argv`` wrapped in a bubblewrap command line (see the module docstring).

    ``control`` are the ``--ro-bind`` pairs of the workspace's control paths
    (:meth:`personae.tools.control.Placeholders.acquire`), bound after the
    workspace; ``seccomp_fd`` holds the socket rule (network off), passed to
    bubblewrap as an inherited descriptor.
    """
    user_home = home if home is not None else os.path.expanduser("~")
    args = _base_args(bwrap, network=network, seccomp_fd=seccomp_fd)
    if (
        user_home
        and os.path.isabs(user_home)
        and os.path.normpath(user_home) != "/"
        and os.path.isdir(user_home)  # a home that does not exist has nothing to hide
    ):
        args += ["--tmpfs", os.path.normpath(user_home)]
    for path in expand_allowed(allow_paths, user_home):
        args += ["--ro-bind-try", path, path]
    args += ["--bind", str(workspace), str(workspace), *(control or [])]
    return [*args, "--chdir", str(cwd), "--", *argv]
