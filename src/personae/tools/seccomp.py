"""The socket rule of the ``run_shell`` sandbox: a seccomp filter handed to bubblewrap.

With the network off, a sandboxed command may create only IP sockets (its own
network namespace has nothing but a loopback device) and netlink sockets
(``ip``, glibc's address lookups). Every other ``socket()`` call fails with
``EPERM``: above all ``AF_UNIX``, so no Unix socket anywhere on the read-only
file system (Docker, D-Bus, PostgreSQL, an ssh agent) can be connected to, and
``AF_VSOCK`` (a virtual machine's host). ``socketpair()`` stays allowed (a
connected pair of fresh sockets reaches nothing). ``io_uring`` is refused, as
it could create sockets without the ``socket`` system call. System calls of
another ABI (32-bit, x32) kill the process: the filter checks only the native
numbers.

Abstract Unix sockets belong to a network namespace: with the network off
they were already out of reach; the rule refuses them as well.

Why seccomp and not Landlock: up to the kernels in use in 2026, Landlock has no
rule for connecting to a named Unix socket (its scoping covers only abstract
ones), and seccomp needs no kernel newer than bubblewrap itself. The cost is
measured by ``bench/bench_sandbox.py``.

The program is classic BPF, written here (no libseccomp); bubblewrap loads it
from a file descriptor (``--seccomp FD``).
"""

from __future__ import annotations

import errno
import os
import platform
import socket
import struct

__all__ = ["SeccompUnsupportedError", "socket_filter", "socket_filter_fd"]

# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6]
_NR, _ARCH, _ARG0 = 0, 4, 16
_LD_ABS_W = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_KILL_PROCESS = 0x80000000
_ERRNO = 0x00050000
_X32_BIT = 0x40000000
_IO_URING = (425, 426, 427)  # io_uring_setup, io_uring_enter, io_uring_register (all ABIs)

# machine -> (AUDIT_ARCH value, socket syscall number, has an x32 ABI)
_ARCHES: dict[str, tuple[int, int, bool]] = {
    "x86_64": (0xC000003E, 41, True),
    "aarch64": (0xC00000B7, 198, False),
}
_ALLOWED_FAMILIES = (socket.AF_INET, socket.AF_INET6, getattr(socket, "AF_NETLINK", 16))


class SeccompUnsupportedError(RuntimeError):
    """The machine's architecture has no socket rule here."""


def socket_filter(machine: str | None = None) -> bytes:
    """The compiled filter (``struct sock_filter`` array) for ``machine`` (default: this one).

    Raises:
        SeccompUnsupportedError: an architecture other than x86_64 or aarch64.
    """
    name = machine or platform.machine()
    if name not in _ARCHES:
        raise SeccompUnsupportedError(f"no socket rule for the {name} architecture")
    arch, nr_socket, x32 = _ARCHES[name]
    deny = _ERRNO | errno.EPERM
    # (code, jump-if-true label, jump-if-false label, k); labels are resolved below.
    prog: list[tuple[int, str | None, str | None, int]] = [
        (_LD_ABS_W, None, None, _ARCH),
        (_JEQ, None, "kill", arch),
        (_LD_ABS_W, None, None, _NR),
    ]
    if x32:
        prog.append((_JGE, "kill", None, _X32_BIT))
    prog.append((_JEQ, "family", None, nr_socket))
    prog += [(_JEQ, "deny", None, nr) for nr in _IO_URING]
    prog.append((_RET, None, None, _ALLOW))
    labels = {"family": len(prog)}
    prog.append((_LD_ABS_W, None, None, _ARG0))
    prog += [(_JEQ, "allow", None, fam) for fam in _ALLOWED_FAMILIES]
    labels["deny"] = len(prog)
    prog.append((_RET, None, None, deny))
    labels["allow"] = len(prog)
    prog.append((_RET, None, None, _ALLOW))
    labels["kill"] = len(prog)
    prog.append((_RET, None, None, _KILL_PROCESS))
    out = bytearray()
    for index, (code, true, false, k) in enumerate(prog):
        jt = 0 if true is None else labels[true] - index - 1
        jf = 0 if false is None else labels[false] - index - 1
        out += struct.pack("=HBBI", code, jt, jf, k)
    return bytes(out)


def socket_filter_fd() -> int:
    """A file descriptor holding :func:`socket_filter`, positioned at its start.

    The caller passes it to bubblewrap (``--seccomp FD``, ``pass_fds``) and
    closes it once bubblewrap has started.
    """
    data = socket_filter()
    fd = os.memfd_create("personae-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd
