"""Attacks by the contained agent itself on the run_shell sandbox and the file tools.

Run as root (as CI does) and, where root and an unprivileged user differ, as
``nobody`` too (``runuser``): capabilities, mount, mknod, control paths
(``.git``, ``.personae``, host settings), Unix sockets outside the workspace.
Each attack is also run unsandboxed (mode ``off``) or with the grant, so the
check can fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _helpers import run_async
from personae.errors import ConfigError, ToolError
from personae.layout import CONTROL_DIRS, CONTROL_FILES, CONTROL_NAMES
from personae.project import SandboxConfig
from personae.tools import ToolLimits, ToolRegistry, ToolSubset, Workspace
from personae.tools.control import Placeholders
from personae.tools.sandbox import bwrap_status, sandbox_argv

pytestmark = pytest.mark.sandbox

SYS_PYTHON = "/usr/bin/python3"
"""The system's Python: the test's own may live under the (hidden) home folder."""


@pytest.fixture(autouse=True)
def _needs_bwrap() -> None:
    status = bwrap_status()
    assert status.available, f"{status.reason}: run scripts/setup.d/30-bubblewrap.sh"


def _tools(root: Path, **limits: Any) -> ToolSubset:
    names = ["run_shell", "write_file", "edit_file", "read_file"]
    return ToolRegistry.builtin(Workspace(root), limits=ToolLimits(**limits)).subset(names)


def sh(tools: ToolSubset, command: str | list[str]) -> str:
    return run_async(tools.dispatch("run_shell", {"command": command}))


def fails(tools: ToolSubset, command: str) -> str:
    """The error text of a command that must fail."""
    with pytest.raises(ToolError) as err:
        sh(tools, command)
    return str(err.value)


# --- 1. capabilities ------------------------------------------------------------


STATUS = "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status"


def test_no_capability_survives_in_the_sandbox(tmp_path: Path) -> None:
    out = sh(_tools(tmp_path), STATUS)
    fields = dict(line.split(":\t") for line in out.splitlines() if ":\t" in line)
    for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert int(fields[cap], 16) == 0, out
    # bubblewrap run by root leaves the bounding set; no-new-privileges keeps every
    # execve (a set-user-id program, root's own exec rule) from gaining any of it back.
    assert fields["NoNewPrivs"] == "1", out
    if os.geteuid() == 0:  # the check can fail: unsandboxed root has them all
        plain = sh(_tools(tmp_path, shell_sandbox="off"), STATUS)
        assert "CapEff:\t0000000000000000" not in plain


def test_mount_remount_and_mknod_fail(tmp_path: Path) -> None:
    tools = _tools(tmp_path)
    (tmp_path / "mnt").mkdir()
    marker = f"/etc/personae-escape-{os.getpid()}"
    assert "permission denied" in fails(tools, f"mount -o remount,rw / && touch {marker}")
    assert not os.path.exists(marker)
    fails(tools, "mount -t tmpfs none mnt")
    fails(tools, "mount --bind / mnt")
    assert "Operation not permitted" in fails(tools, "mknod mem c 1 1")
    assert not (tmp_path / "mem").exists()
    fails(tools, "echo 1 > /proc/sys/kernel/sysrq")
    fails(tools, "echo h > /proc/sysrq-trigger")
    fails(tools, "unshare -r true")  # no new user namespace to regain capabilities in


@pytest.fixture
def world_ws() -> Iterator[Path]:
    """A workspace an unprivileged user can write (not under root's private tmp)."""
    path = Path(tempfile.mkdtemp(prefix="personae-nobody-", dir="/tmp"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch to nobody")
def test_as_nobody_the_same_attacks_fail(world_ws: Path) -> None:
    """The same bubblewrap command line, started by an unprivileged user.

    (personae's Python lives under root's home here, out of nobody's reach, so
    the command line run_shell builds is run directly.)
    """
    assert shutil.which("runuser"), "runuser (util-linux) is missing"
    status = bwrap_status()
    assert status.bwrap is not None
    (world_ws / ".git").mkdir()
    (world_ws / ".git" / "config").write_text("[core]\n")
    (world_ws / ".git").chmod(0o777)
    (world_ws / ".git" / "config").chmod(0o666)
    cmds = {"grep CapEff /proc/self/status": "CapEff:\t0000000000000000",
            "mount -o remount,rw / || echo REFUSED": "REFUSED",
            "mknod m c 1 1 || echo REFUSED": "REFUSED",
            "echo x > .git/config || echo REFUSED": "REFUSED",
            "echo ok > plain.txt && cat plain.txt": "ok"}  # fmt: skip
    placeholders = Placeholders()
    for cmd, expected in cmds.items():
        lease = placeholders.acquire(world_ws)
        try:
            argv = sandbox_argv(["/bin/sh", "-c", cmd], bwrap=status.bwrap, workspace=world_ws,
                                cwd=world_ws, home="/nonexistent", control=lease.args)  # fmt: skip
            done = subprocess.run(["runuser", "-u", "nobody", "--", *argv], capture_output=True,
                                  text=True, timeout=60, check=False)  # fmt: skip
        finally:
            placeholders.release(lease)
        assert done.stdout.strip().splitlines()[-1:] == [expected], (cmd, done.stdout, done.stderr)
    assert (world_ws / ".git" / "config").read_text() == "[core]\n"
    # The check can fail: nobody may write the file outside the sandbox.
    subprocess.run(["runuser", "-u", "nobody", "--", "/bin/sh", "-c", "echo x >> config"],
                   cwd=world_ws / ".git", check=True, timeout=60)  # fmt: skip
    assert (world_ws / ".git" / "config").read_text() == "[core]\nx\n"


# --- 2. control paths -------------------------------------------------------------


def _project(root: Path) -> Path:
    """A workspace with every control path present."""
    root.mkdir(parents=True, exist_ok=True)
    for name in CONTROL_DIRS:
        (root / name).mkdir()
        (root / name / "config").write_text("ORIGINAL\n")
    for name in CONTROL_FILES:
        (root / name).write_text("ORIGINAL\n")
    (root / ".git" / "hooks").mkdir()
    return root


def _unchanged(root: Path) -> None:
    for name in CONTROL_DIRS:
        assert (root / name / "config").read_text() == "ORIGINAL\n", name
        assert sorted(p.name for p in (root / name).iterdir()) in (["config"], ["config", "hooks"])
    for name in CONTROL_FILES:
        assert (root / name).read_text() == "ORIGINAL\n", name
    assert list((root / ".git" / "hooks").iterdir()) == []


def test_existing_control_paths_are_read_only_to_commands(tmp_path: Path) -> None:
    root = _project(tmp_path / "ws")
    tools = _tools(root)
    attacks = [
        "printf 'sandbox: {network: true, allow_paths: [\"~\"]}\\n' >> .personae/config",
        "echo 'echo pwned' > .git/hooks/pre-commit",
        "git config --file .git/config core.fsmonitor 'touch /tmp/pwned'",
        "ln -s .git g && echo x > g/hooks/post-commit",  # through a link
        "mkdir -p sub && cd sub && echo x >> ../.claude/config",  # through ..
        "mv .mcp.json moved.json",
        "rm -rf .github",
        "ln .codex/config stolen && echo x >> stolen",  # a hard link elsewhere
        *(f"echo x >> {name}" for name in CONTROL_FILES),
        *(f"touch {name}/new" for name in CONTROL_DIRS),
    ]
    for attack in attacks:
        fails(tools, attack)
    _unchanged(root)
    assert sh(tools, "cat .personae/config CLAUDE.md").count("ORIGINAL") == 2  # readable
    assert sh(tools, "echo fine > notes.txt && cat notes.txt").startswith("fine")


def test_missing_control_paths_cannot_be_created_and_leave_nothing(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    tools = _tools(root)
    for name in CONTROL_DIRS:
        fails(tools, f"mkdir -p {name}/hooks || touch {name}/x")
    for name in CONTROL_FILES:
        fails(tools, f"echo x > {name}")
    fails(tools, "git init -q .")
    fails(tools, "mkdir evil && echo x > evil/f && mv evil .claude")
    fails(tools, "ln -s elsewhere CLAUDE.md")
    # The placeholders are gone once the commands ended; the rest of the work stays.
    assert sorted(p.name for p in root.iterdir()) == ["evil"]
    # Unsandboxed the same command creates it: the check can fail.
    sh(_tools(root, shell_sandbox="off"), "mkdir .claude && echo x > CLAUDE.md")
    assert (root / ".claude").is_dir() and (root / "CLAUDE.md").exists()


def test_a_placeholder_outlives_a_command_while_another_runs(tmp_path: Path) -> None:
    """Two commands at once: the first one's end must not unblock the second."""
    tools = _tools(tmp_path)

    async def both() -> tuple[Any, Any]:
        slow = tools.dispatch("run_shell", {"command": "sleep 1.5; mkdir .git/hooks"})
        quick = tools.dispatch("run_shell", {"command": "true"})
        return tuple(await asyncio.gather(slow, quick, return_exceptions=True))  # type: ignore[return-value]

    slow, quick = asyncio.run(both())
    assert isinstance(slow, ToolError), slow
    assert isinstance(quick, str), quick
    assert list(tmp_path.iterdir()) == []


def test_a_dangling_control_link_refuses_the_command(tmp_path: Path) -> None:
    (tmp_path / "CLAUDE.md").symlink_to(tmp_path / "later.md")
    tools = _tools(tmp_path)
    with pytest.raises(ToolError, match="link to a missing path"):
        sh(tools, "echo x > later.md")
    assert not (tmp_path / "later.md").exists()


@pytest.mark.parametrize(
    "path",
    [".git/hooks/pre-commit", "./.git/config", "sub/../.personae/config.yaml",
     ".PERSONAE/config.yaml", "claude.md", "CLAUDE.md", "AGENTS.md", ".mcp.json",
     ".claude/settings.json", ".github/workflows/x.yml", "link/hooks/pre-commit"],
)  # fmt: skip
def test_file_tools_refuse_control_paths(tmp_path: Path, path: str) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / ".git").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / ".git")
    tools = _tools(tmp_path)
    with pytest.raises(ToolError, match="control path"):
        run_async(tools.dispatch("write_file", {"path": path, "content": "x"}))
    (tmp_path / "CLAUDE.md").write_text("keep\n")
    with pytest.raises(ToolError, match="control path"):
        run_async(tools.dispatch("edit_file", {"path": "CLAUDE.md", "old_string": "keep",
                                               "new_string": "x"}))  # fmt: skip
    assert (tmp_path / "CLAUDE.md").read_text() == "keep\n"
    assert not (tmp_path / ".git" / "hooks").exists()
    assert not (tmp_path / "claude.md").exists()


def test_a_grant_opens_only_what_it_names(tmp_path: Path) -> None:
    root = _project(tmp_path / "ws")
    tools = _tools(root, control_write=(".git",))
    sh(tools, "echo hook > .git/hooks/pre-commit")
    run_async(tools.dispatch("write_file", {"path": ".git/info", "content": "x"}))
    assert (root / ".git" / "hooks" / "pre-commit").read_text() == "hook\n"
    fails(tools, "echo x >> .personae/config")
    with pytest.raises(ToolError, match="control path"):
        run_async(tools.dispatch("write_file", {"path": "CLAUDE.md", "content": "x"}))


def test_personae_folder_cannot_be_granted() -> None:
    with pytest.raises(ConfigError, match="control_write"):
        ToolLimits(control_write=(".personae",))
    with pytest.raises(ValueError, match="cannot be granted"):
        SandboxConfig.model_validate({"control_write": {"coder": [".personae"]}})
    assert SandboxConfig.model_validate({"control_write": {"coder": [".git"]}}).control_write
    assert ".personae" in CONTROL_NAMES


# --- 3. sockets ---------------------------------------------------------------------


class _UnixServer:
    """A Unix socket listener (path or abstract) answering one line to each client."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(address)
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(b"REACHED\n")

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()
        if not self.address.startswith("\0"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.address)


CONNECT = (
    "import socket, sys\n"
    "for a in sys.argv[1:]:\n"
    "    a = a.replace('@', '\\0', 1) if a.startswith('@') else a\n"
    "    try:\n"
    "        s = socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect(a)\n"
    "        print('REACHED' if s.recv(16).startswith(b'REACHED') else 'SILENT', repr(a))\n"
    "    except OSError as e:\n"
    "        print('BLOCKED', repr(a), e.strerror)\n"
)


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[str]]:
    home = Path(os.path.expanduser("~"))
    tag = f"personae-{os.getpid()}"
    spots = [f"/var/tmp/{tag}.sock", f"/tmp/{tag}.sock", str(home / f".{tag}.sock"),
             f"/run/{tag}.sock", f"@{tag}-abstract"]  # fmt: skip
    if os.access("/dev/shm", os.W_OK):
        spots.append(f"/dev/shm/{tag}.sock")
    opened = [_UnixServer(s.replace("@", "\0", 1)) for s in spots]
    yield spots
    for server in opened:
        server.close()


def test_no_unix_socket_outside_is_reachable(tmp_path: Path, servers: list[str]) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    argv = [SYS_PYTHON, "-c", CONNECT, *servers]
    out = sh(_tools(ws), argv)
    lines = [line for line in out.splitlines() if line[:1].isupper() and " " in line]
    assert len(lines) == len(servers) and all(x.startswith("BLOCKED") for x in lines), out
    # Without the sandbox every one of them answers: the check can fail.
    plain = sh(_tools(ws, shell_sandbox="off"), argv)
    assert plain.count("REACHED") == len(servers), plain


def test_sockets_inside_and_other_families(tmp_path: Path) -> None:
    script = (
        "import socket\n"
        "a, b = socket.socketpair(); a.sendall(b'pair'); print(b.recv(4).decode())\n"
        "s = socket.socket(socket.AF_INET); s.bind(('127.0.0.1', 0)); print('inet ok')\n"
        "for fam in ('AF_UNIX', 'AF_VSOCK', 'AF_PACKET', 'AF_ALG'):\n"
        "    try:\n"
        "        socket.socket(getattr(socket, fam)); print(fam, 'OPEN')\n"
        "    except OSError as e:\n"
        "        print(fam, 'refused', e.errno)\n"
    )
    out = sh(_tools(tmp_path), [SYS_PYTHON, "-c", script])
    assert "pair\ninet ok\n" in out
    for fam in ("AF_UNIX", "AF_VSOCK", "AF_PACKET", "AF_ALG"):
        assert f"{fam} refused" in out, out
    # The network grant lifts the rule: Unix sockets work again.
    allowed = sh(_tools(tmp_path, shell_network=True), [SYS_PYTHON, "-c", script])
    assert "AF_UNIX OPEN" in allowed


def test_private_run_var_tmp_and_shm(tmp_path: Path) -> None:
    tag = f"personae-seen-{os.getpid()}"
    made = [Path("/var/tmp") / tag, Path("/run") / tag]
    if os.access("/dev/shm", os.W_OK):
        made.append(Path("/dev/shm") / tag)
    for path in made:
        path.write_text("HOST\n")
    try:
        out = sh(_tools(tmp_path), "ls /var/tmp /run /dev/shm /var/run 2>&1; echo END")
        assert tag not in out, out
        plain = sh(_tools(tmp_path, shell_sandbox="off"), "ls /var/tmp /run")
        assert tag in plain
    finally:
        for path in made:
            path.unlink()
