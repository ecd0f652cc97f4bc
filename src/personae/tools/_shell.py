"""Built-in run_shell: a command in the workspace with a timeout, output cap and clean env.

Commands run under the bubblewrap sandbox when it works here (see
:mod:`personae.tools.sandbox`; without it, one warning per run). Every command
runs in its own process group, dies with its parent thread
(``PR_SET_PDEATHSIG``) and is registered with the run's process registry
(:mod:`personae.procs`), so nothing it starts outlives the run; on timeout (and
once the command has exited, for anything it left running in the background)
the whole group is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from personae.errors import ConfigError
from personae.procs import RUN_PROCESSES, die_with_parent, exit_descriptor
from personae.tools.base import ToolContext, ToolLimits
from personae.tools.control import Lease, Placeholders
from personae.tools.sandbox import (
    INSTALL_HINT,
    SandboxStatus,
    bwrap_status,
    sandbox_argv,
    unattended,
)
from personae.tools.seccomp import socket_filter_fd

__all__ = ["RunShellArgs", "check_env_allow", "run_shell", "scrubbed_env"]

SAFE_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TERM", "TZ", "USER", "LOGNAME")
"""Variables passed through from personae's own environment."""

_DANGEROUS = re.compile(
    # Variables that make a program load or run code of their choosing.
    r"^(LD_|DYLD_|PYTHON|PERL5|PERLLIB|RUBY|NODE_|JAVA_TOOL|_JAVA|GCONV|MALLOC_|GIT_)"
    r"|^(GLIBC_TUNABLES|LESSOPEN|LESSCLOSE|OPENSSL_|NPM_CONFIG_|LUA_|PHPRC|R_PROFILE|R_ENVIRON)"
    r"|^(BASH_ENV|ENV|IFS|SHELLOPTS|BASHOPTS|PS[0-9]|PROMPT_COMMAND|CDPATH|HOME|TMPDIR|PWD)$"
    r"|^(SHELL|EDITOR|VISUAL|PAGER|BROWSER|VIMINIT|GVIMINIT|EXINIT|MYVIMRC|ZDOTDIR)$"
    r"|_OPTIONS$|_OPTS$"
    # Variables that carry secrets.
    r"|TOKEN|SECRET|PASS|CREDENTIAL|API_?KEY|(^|_)KEYS?(_|$)|PRIVATE|COOKIE|AUTH|SESSION"
    r"|^AWS_|^GH_|^GITHUB_|^OPENAI|^ANTHROPIC",
    re.IGNORECASE,
)
_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


class RunShellArgs(BaseModel):
    """Arguments of ``run_shell``."""

    model_config = ConfigDict(extra="forbid")

    command: str | list[str] = Field(
        description="A shell command line (run by /bin/sh -c) or an argv list run directly."
    )
    cwd: str = Field(default=".", description="Working directory, relative to the workspace root.")
    timeout: float | None = Field(
        default=None, gt=0, description="Seconds before the command is killed (capped)."
    )


def check_env_allow(names: tuple[str, ...]) -> None:
    """Refuse allow-listed variable names that inject code or carry secrets."""
    for name in names:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ConfigError(
                f"invalid environment variable name {name!r}", field="shell_env_allow"
            )
        if _DANGEROUS.search(name):
            raise ConfigError(
                f"environment variable {name!r} may not be passed to commands "
                "(it can inject code or carry a secret)",
                field="shell_env_allow",
            )


def scrubbed_env(
    cwd: str, root: str, limits: ToolLimits, source: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment a command gets: a few safe variables, HOME/TMPDIR in the workspace."""
    check_env_allow(limits.shell_env_allow)
    src = os.environ if source is None else source
    env = {k: src[k] for k in (*SAFE_ENV, *limits.shell_env_allow) if k in src}
    # Relative PATH entries would resolve against the (model-chosen) cwd.
    path = [p for p in env.get("PATH", _DEFAULT_PATH).split(os.pathsep) if os.path.isabs(p)]
    env["PATH"] = os.pathsep.join(path) or _DEFAULT_PATH
    env["HOME"] = root
    env["PWD"] = cwd
    return env


_warned = threading.Event()
PLACEHOLDERS = Placeholders()
"""This process's placeholders for missing control paths (see :mod:`personae.tools.control`)."""


@dataclass
class _Sandbox:
    """How one command runs: its argv, and what to release once it has ended."""

    argv: list[str]
    lease: Lease | None = None
    fds: tuple[int, ...] = ()

    def close(self) -> None:
        """Close the passed descriptors and end the workspace lease."""
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = ()
        if self.lease is not None:
            PLACEHOLDERS.release(self.lease)
            self.lease = None


def _unsandboxed(status: SandboxStatus, ctx: ToolContext) -> None:
    """Refuse, or warn once, when ``run_shell`` cannot be sandboxed (mode not ``off``)."""
    if ctx.limits.shell_sandbox == "required":
        raise ctx.error(f"the sandbox is required but unavailable: {status.reason}; "
                        f"{INSTALL_HINT}")  # fmt: skip
    if status.transient:
        raise ctx.error(
            f"the sandbox could not be started ({status.reason}); the command was not run "
            "(it never runs unsandboxed for a probe that may pass)"
        )
    if unattended():
        raise ctx.error(
            f"run_shell is not sandboxed here ({status.reason}) and this run is unattended "
            f"(handover child, chain step or batch task): refused; {INSTALL_HINT}, or set "
            "sandbox.mode: off in .personae/config.yaml"
        )
    if not _warned.is_set():
        _warned.set()
        print(
            f"personae: warning: run_shell is not sandboxed ({status.reason}); {INSTALL_HINT}",
            file=sys.stderr,
        )


async def _sandboxed(argv: list[str], cwd: Path, ctx: ToolContext) -> _Sandbox:
    """``argv`` wrapped in the sandbox, as the limits ask and the machine allows."""
    limits = ctx.limits
    if limits.shell_sandbox == "off":
        return _Sandbox(argv)
    status = await asyncio.to_thread(bwrap_status)
    if status.bwrap is None:
        _unsandboxed(status, ctx)
        return _Sandbox(argv)
    root = ctx.workspace.root
    try:
        lease = await asyncio.to_thread(PLACEHOLDERS.acquire, root, limits.control_write)
    except OSError as exc:
        raise ctx.error(f"cannot protect the workspace's control paths: {exc}") from None
    box = _Sandbox(argv, lease)
    try:
        fds = () if limits.shell_network else (socket_filter_fd(),)
        box.fds = fds
        box.argv = sandbox_argv(
            argv,
            bwrap=status.bwrap,
            workspace=root,
            cwd=cwd,
            network=limits.shell_network,
            allow_paths=limits.shell_allow_paths,
            control=lease.args,
            seccomp_fd=fds[0] if fds else None,
        )
    except BaseException:
        box.close()
        raise
    return box


def _cap_timeout(requested: float | None, limit: float | None) -> float | None:
    if requested is None:
        return limit
    return requested if limit is None else min(requested, limit)


async def _drain(stream: asyncio.StreamReader, cap: int | None, kept: bytearray) -> int:
    """Read ``stream`` to EOF keeping at most ``cap`` bytes; return the total size."""
    total = 0
    while chunk := await stream.read(65536):
        total += len(chunk)
        room = len(chunk) if cap is None else max(0, cap - len(kept))
        if room:
            kept.extend(chunk[:room])
    return total


def _killpg(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def _wait_exit(proc: asyncio.subprocess.Process, timeout: float | None) -> bool:
    """Whether ``proc`` exited within ``timeout`` s.

    Not ``proc.wait()``: on Python 3.11 it also waits for the pipes to close,
    which a background child can hold open indefinitely. Where a process
    descriptor opens (Linux), the exit wakes the wait (:func:`_exit_seen`), then
    ``returncode`` is looked at from 0.5 ms on until asyncio's child watcher has
    set it; elsewhere it is looked at from 2 ms on, doubling up to 50 ms (a
    command ending at 31 ms was seen at 62).
    """
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    seen = await _exit_seen(proc, timeout)
    if seen is False:
        return False
    delay = 0.0005 if seen else 0.002
    while proc.returncode is None:
        if deadline is not None:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            delay = min(delay, remaining)
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)
    return True


async def _exit_seen(proc: asyncio.subprocess.Process, timeout: float | None) -> bool | None:
    """Wait for ``proc``'s exit on a process descriptor: ``True`` once it has exited,
    ``False`` at ``timeout`` s, ``None`` when no descriptor opens (not Linux, or the
    process is already reaped)."""
    exit_fd = exit_descriptor(proc.pid)
    if exit_fd is None:
        return None
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[None] = loop.create_future()

    def seen() -> None:
        if not exited.done():
            exited.set_result(None)

    try:
        loop.add_reader(exit_fd, seen)
    except NotImplementedError:  # an event loop that does not watch descriptors
        os.close(exit_fd)
        return None
    try:
        await asyncio.wait_for(exited, timeout)
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(exit_fd)
        os.close(exit_fd)
    return True


async def _wait_reader(task: asyncio.Task[int], wait: float, *, cancel: bool) -> int | None:
    """The reader's byte count once it hits EOF within ``wait`` s, else ``None``."""
    done, _ = await asyncio.wait({task}, timeout=wait)
    if done:
        return task.result()
    if cancel:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return None


async def run_shell(args: RunShellArgs, ctx: ToolContext) -> str:
    """Run a command; output and exit code are returned, a failure is a tool error."""
    cwd = ctx.workspace.resolve(args.cwd, tool=ctx.tool)
    if not cwd.is_dir():
        raise ctx.error(f"cwd {args.cwd!r} is not a directory")
    if isinstance(args.command, list):
        if not args.command or not args.command[0]:
            raise ctx.error("argv list is empty")
        argv = list(args.command)
    else:
        if not args.command.strip():
            raise ctx.error("command is empty")
        argv = ["/bin/sh", "-c", args.command]
    if any("\x00" in a for a in argv):
        raise ctx.error("command contains a NUL byte")
    limits = ctx.limits
    env = scrubbed_env(str(cwd), str(ctx.workspace.root), limits)
    if "/" not in argv[0] and shutil.which(argv[0], path=env["PATH"]) is None:
        raise ctx.error(f"command not found: {argv[0]!r}")
    box = await _sandboxed(argv, cwd, ctx)
    try:
        return await _start(box, cwd, env, _cap_timeout(args.timeout, limits.shell_timeout), ctx)
    finally:
        box.close()


async def _start(
    box: _Sandbox, cwd: Path, env: dict[str, str], timeout: float | None, ctx: ToolContext
) -> str:
    """Start the (wrapped) command and supervise it to its end."""
    argv = box.argv
    started = time.monotonic()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent(register=True),
            pass_fds=box.fds,
        )
    except FileNotFoundError:
        raise ctx.error(f"command not found: {argv[0]!r}") from None
    except PermissionError:
        raise ctx.error(f"permission denied: {argv[0]!r}") from None
    for fd in box.fds:  # bubblewrap has its copy
        with contextlib.suppress(OSError):
            os.close(fd)
    box.fds = ()
    with RUN_PROCESSES.tracked(proc.pid):
        return await _supervise(proc, timeout, ctx.limits, ctx, started)


async def _supervise(
    proc: asyncio.subprocess.Process,
    timeout: float | None,
    limits: ToolLimits,
    ctx: ToolContext,
    started: float,
) -> str:
    """Collect the output of a started command, enforce its timeout and kill its group."""
    kept = bytearray()
    assert proc.stdout is not None
    reader = asyncio.ensure_future(_drain(proc.stdout, limits.shell_max_output, kept))
    try:
        timed_out = not await _wait_exit(proc, timeout)
    finally:
        if proc.returncode is None:  # timed out or cancelled
            _killpg(proc.pid)
            await _wait_exit(proc, None)
    # Pipes close when every process holding them is gone; give them a moment,
    # then kill whatever the command left running and stop waiting.
    total = await _wait_reader(reader, 1.0 if timed_out else limits.shell_grace, cancel=False)
    _killpg(proc.pid)
    if total is None:
        total = await _wait_reader(reader, 1.0, cancel=True)
    elapsed = time.monotonic() - started
    text = bytes(kept).decode("utf-8", errors="replace")
    if total is not None and total > len(kept):
        text += f"\n[output truncated: kept the first {len(kept)} of {total} bytes]"
    elif total is None:
        text += "\n[output incomplete: a background process kept the pipe open]"
    if timed_out:
        raise ctx.error(
            f"timed out after {timeout:g}s; the process group was killed\n{text}".rstrip(),
            timed_out=True,
        )
    code = proc.returncode
    if code != 0:
        reason = (
            f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        )
        raise ctx.error(f"{reason}\n{text}".rstrip(), exit_code=code)
    return f"{text.rstrip()}\n[exit code 0, {elapsed:.2f}s]".lstrip("\n")
