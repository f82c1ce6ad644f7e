"""Limits, lost privileges and the seccomp filter of the worker and its lesson processes."""

from __future__ import annotations

import os
import sys
from typing import Any

import torch

SECCOMP = [False]  # whether the lesson process's seccomp filter is in place


def limits_report() -> dict:
    import resource

    names = ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_CORE", "RLIMIT_NPROC")
    report: dict[str, Any] = {n: list(resource.getrlimit(getattr(resource, n))) for n in names}
    try:
        with open("/proc/self/status") as f:
            status = dict(line.split(":", 1) for line in f if ":" in line)
        report["CapEff"] = int(status["CapEff"].strip(), 16)
        report["CapBnd"] = int(status["CapBnd"].strip(), 16)
        report["NoNewPrivs"] = int(status.get("NoNewPrivs", "0").strip())
    except (OSError, KeyError, ValueError):
        pass
    report["cwd"] = os.getcwd()
    report["sys_path"] = list(sys.path)
    report["threads"] = torch.get_num_threads()
    report["seccomp"] = SECCOMP[0]
    return report


def _set_limit(name: str, value: int | None) -> None:
    import resource

    if value is None:
        return
    which = getattr(resource, name)
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


def harden(memory: int, cpu: int, fsize: int, nproc: int) -> None:
    """Limits and lost privileges for this process and its children, before any student code.

    Address space, CPU time, file size, no core dumps, a process cap (not enforced for root by
    the kernel); then, on Linux: die with the parent, not dumpable, no new privileges, and no
    capabilities at all (so even root cannot raise the limits back).
    """
    _set_limit("RLIMIT_AS", memory)
    _set_limit("RLIMIT_CPU", cpu)
    _set_limit("RLIMIT_FSIZE", fsize)
    _set_limit("RLIMIT_CORE", 0)
    if os.geteuid() != 0:
        _set_limit("RLIMIT_NPROC", nproc)
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    _die_with_parent()
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no core dumps, no ptrace by others
    libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL
    for cap in range(64):
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP (fails harmlessly when not allowed)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [(n, ctypes.c_uint32) for n in ("effective", "permitted", "inheritable")]

    header = Header(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    libc.capset(ctypes.byref(header), (Data * 2)())


# What graded code never needs: new threads and processes (a trace records one thread),
# the kernel's doors out of a sandbox or into other processes, and anonymous files (memory
# that no per-process cap counts: 256 descriptors of 64 MiB each held 4.4 GiB past the cap).
REFUSED_SYSCALLS = (
    "clone", "clone3", "fork", "vfork", "execve", "execveat", "ptrace", "process_vm_readv",
    "process_vm_writev", "mount", "umount2", "pivot_root", "chroot", "unshare", "setns",
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "open_by_handle_at", "name_to_handle_at", "io_uring_setup", "swapon", "swapoff", "reboot",
    "memfd_create", "memfd_secret",
)  # fmt: skip


def refuse_syscalls() -> bool:
    """A seccomp filter (built with libseccomp, through ctypes: the worker imports only the
    standard library and torch) that fails REFUSED_SYSCALLS with EPERM in this process and
    anything it could start, for good. False where libseccomp is not there (not Linux)."""
    import ctypes
    import errno

    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError:
        return False
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    context = lib.seccomp_init(0x7FFF0000)  # SCMP_ACT_ALLOW: everything else is allowed
    if not context:
        return False
    try:
        for name in REFUSED_SYSCALLS:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number >= 0:  # __NR_SCMP_ERROR (-1): not a system call on this architecture
                lib.seccomp_rule_add(context, 0x00050000 | errno.EPERM, number, 0)
        return lib.seccomp_load(context) == 0
    finally:
        lib.seccomp_release(context)


def _die_with_parent() -> None:
    """PR_SET_PDEATHSIG: this process ends with its parent (Linux). The worker runs standalone,
    so it keeps its own copy of core.cli.die_with_parent."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)
