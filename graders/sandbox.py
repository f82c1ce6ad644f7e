"""How the grading worker is launched: the one place that decides what wraps it.

``graders.launch`` builds ``base_cmd``: ``[python, "-I", "-c", BOOTSTRAP, <limits...>,
"--target", TARGET]``. It passes everything the worker needs through that argv, a small
environment and standard input (the worker's own source arrives there as the first frame),
never through files of the grader tree, so a sandbox only needs to show the worker the Python
installation (with its site-packages, including GPT-2's vocabulary file) and ``target``
(read-only), plus a writable temporary directory as its working directory.

Without a sandbox the worker runs as the same user as the checker (see graders/client.py
for what that leaves open).
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import site
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .worker import limits


def worker_command(base_cmd: list[str], target: Path, *, sandbox: bool) -> list[str]:
    """The command that starts a grading worker for ``target``.

    With ``sandbox=False`` this is ``base_cmd`` unchanged. ``target`` is the student's package
    directory; the last two elements of ``base_cmd`` are ``--target`` and its path, which a
    sandbox may rewrite to wherever it mounts the directory.
    """
    if not sandbox:
        return list(base_cmd)
    # The sandbox branch (instructor tooling): _sandbox_command's docstring says exactly what
    # it enforces and what it does not.
    if not base_cmd:  # graders.runner's preflight: can a sandbox start here at all?
        try:
            return _sandbox_command([], Path(target))
        except SandboxUnavailable as error:
            raise NotImplementedError(str(error)) from None
    return _sandbox_command(list(base_cmd), Path(target))


@dataclass(frozen=True)
class SandboxLimits:
    """Hard limits of a sandboxed worker (prlimit inside the sandbox; the worker may go lower),
    from the one table of them (graders/worker/limits.py); the copy limits are the sandbox's."""

    address_space: int = limits.MEMORY  # RLIMIT_AS; raised to the worker's --memory if higher
    cpu_seconds: int = limits.CPU_SECONDS  # RLIMIT_CPU of each process
    processes: int = limits.SANDBOX_PROCESSES  # RLIMIT_NPROC: the sandbox's own user's
    file_size: int = limits.FILE_SIZE  # bytes (RLIMIT_FSIZE)
    open_files: int = limits.OPEN_FILES  # RLIMIT_NOFILE
    scratch: int = limits.SCRATCH  # bytes of the private /tmp (a tmpfs: counts as memory)
    copy_file: int = 16 << 20  # target files larger than this are not copied in
    copy_total: int = 64 << 20  # nor more than this in all


LIMITS = SandboxLimits()
SANDBOX_HOME = "/home/student"  # where the copy of the target appears inside the sandbox
PROVIDED_HOME = "/opt/course"  # where the provided package (worker's --provided) appears
# Packages of this project that must never be visible to the student's code, should the
# project be pip-installed into the interpreter that runs the worker.
PROJECT_PACKAGES = ("solutions", "graders")


class SandboxUnavailable(OSError):
    """bubblewrap is missing or cannot create a sandbox on this machine."""


_probed: dict[tuple, str | None] = {}
_copies: list[str] = []
_uids = itertools.count()


def _sandbox_command(
    base_cmd: list[str], target: Path, limits: SandboxLimits = LIMITS
) -> list[str]:
    """``base_cmd`` wrapped in bubblewrap, setpriv (when root) and prlimit.

    What ``sandbox=True`` enforces (Linux only).

    The worker runs in ``bwrap`` with new PID, network, IPC, UTS and (where possible) cgroup
    namespaces, ``--die-with-parent`` and ``--new-session`` (no terminal to inject keystrokes
    into), so:

    * Network: none. Its network namespace holds only a loopback interface that is down: no
      connection anywhere, not even to the host's localhost services; no abstract Unix sockets
      of the host either.
    * Files: a fresh root holding only, read-only: /usr (with the /bin, /lib, ... links), the
      dynamic loader's cache, the Python installation and virtualenv running the worker (stdlib
      and site-packages, including GPT-2's vocabulary file; ``solutions`` or ``graders`` packages
      installed there are masked by empty directories), $GPT2_TIKTOKEN / $TIKTOKEN_CACHE_DIR when
      set, and a private copy of the target (its regular files only: no symbolic links, devices
      or FIFOs; at most 16 MiB a file, 64 MiB in all) at /home/student/NAME. Writable: a private
      /tmp (tmpfs of 256 MiB), the working directory and $HOME. New /proc (only the sandbox's own
      processes) and a minimal /dev. Nothing else of the host exists inside: not the project
      (solutions/, graders/ with the hidden graders), not the nbgrader course directory (source/,
      the gradebook, results/), not home directories, /etc/passwd or the checker's files
      (where the Python installation lives in a home directory, only the installation is
      there). The copy is made when the worker starts (later edits of the target are not
      seen; a worker kept for the next grading of the same target has it made again then,
      ``refresh_copy``) and deleted when the checker exits.
    * Processes: PID namespace, so the checker and every other host process are invisible and
      cannot be signalled; killing the worker's process group (as graders.client does) kills bwrap
      and with it every process of the sandbox.
    * User: not root. When the checker runs as root, bwrap runs privileged (no user namespace,
      because the kernel would map the sandbox's user to root again and exempt it from
      RLIMIT_NPROC) and ``setpriv`` switches to a user id of its own (100000 + a per-sandbox
      number, so no two sandboxes share a process count), with no supplementary groups, no
      capabilities (effective, permitted, inheritable, ambient, bounding) and no_new_privs. As an
      ordinary user, bwrap runs in a new user namespace as that user with no capabilities.
    * Memory of the whole sandbox, where the machine allows it (:func:`memory_cgroup_available`:
      cgroup v2 with its memory controller, and ``systemd-run --scope``, ``--user`` unless
      root): bwrap starts in a transient scope of ``MemoryMax`` = one process's address space
      plus the scratch /tmp (4.25 GiB by default) and no swap, so all its processes and their
      /tmp together stay under it (the kernel's OOM killer acts inside the scope only).
    * Limits (``prlimit``, hard, per process; SandboxLimits): address space 4 GiB (or the
      worker's --memory if larger), CPU time 3600 s, 64 processes and threads for the sandbox's
      user, 64 MiB per file written, 256 open files, no core dumps, no POSIX message queues. The
      worker then lowers its own (graders/worker/hardening.py). Output: the checker drains the
      worker's output and fails a call that prints more than 8 MiB (graders/client.py); files
      are capped by the file-size limit and the 256 MiB of /tmp.

    Not enforced: most of the kernel's system-call surface stays reachable (the lesson process's
    seccomp filter, graders/worker/hardening.py, refuses only REFUSED_SYSCALLS: new processes,
    threads, memfd and the like), so a kernel exploit would escape; where no cgroup can be had
    (cgroup v1, no systemd, no user session), memory is capped per process by address space
    only (64 processes x 4 GiB is the theoretical bound; the per-call timeout is the practical
    one) and the tmpfs counts against the host's memory; CPU time is capped per process, wall
    time by the checker's per-call timeout; disk I/O and CPU share are not throttled; the student
    can read the Python installation and site-packages (public software) and their own files; the
    worker's own environment (a small one, from graders.launch) is passed through, with PATH,
    HOME and TMPDIR replaced. Needs bubblewrap (``apt-get install bubblewrap``), util-linux's
    ``setpriv`` and ``prlimit``, and as a non-root user unprivileged user namespaces
    (kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 also
    kernel.apparmor_restrict_unprivileged_userns=0, or run as root).
    """
    tools = {
        name: shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin") or ""  # "": missing
        for name in ("bwrap", "prlimit", "setpriv")
    }
    missing = [name for name in ("bwrap", "prlimit") if not tools[name]]
    root = os.geteuid() == 0
    if root and not tools["setpriv"]:
        missing.append("setpriv")
    if missing:
        raise SandboxUnavailable(
            f"the grading sandbox needs {', '.join(missing)}: apt-get install bubblewrap util-linux"
        )
    prefix = _bwrap_prefix(tools["bwrap"], root, limits)
    if root:
        # As root the kernel ignores RLIMIT_NPROC; run the student's code as a user of its own
        # (unique per sandbox, so that two sandboxes never share a process count).
        uid = str(100_000 + ((os.getpid() << 6) | (next(_uids) & 63)) % 2_000_000_000)
        drop = [
            tools["setpriv"],
            "--reuid",
            uid,
            "--regid",
            uid,
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
        ]
    else:
        drop = []
    _probe(prefix, drop, tools["prlimit"])
    if not base_cmd:
        return []
    target = Path(target).resolve()
    copy = _private_copy(target, limits)
    inside = f"{SANDBOX_HOME}/{target.name or 'submission'}"
    command = list(base_cmd)
    if os.path.isabs(command[0]):
        # Only resolved paths are bound inside; keep the last link (a virtualenv's python is
        # found through its own path) but resolve the folders above it.
        folder, name = os.path.split(command[0])
        command[0] = os.path.join(os.path.realpath(folder), name)
    if len(command) >= 2 and command[-2] == "--target":
        command[-1] = inside
    else:  # an unknown command line: keep the target's own path
        inside = str(target)
    memory = _option(command, "--memory")
    rlimits = [
        f"--as={max(limits.address_space, memory or 0)}",
        f"--cpu={limits.cpu_seconds}",
        f"--nproc={limits.processes}",
        f"--fsize={limits.file_size}",
        f"--nofile={limits.open_files}",
        "--core=0",
        "--msgqueue=0",
    ]
    mounts = ["--perms", "0755", "--dir", SANDBOX_HOME, "--ro-bind", copy, inside]
    if "--provided" in command:  # the course's provided package (gpt/): public, read-only
        at = command.index("--provided") + 1
        provided = os.path.realpath(command[at])
        command[at] = f"{PROVIDED_HOME}/{os.path.basename(provided)}"
        mounts += ["--perms", "0755", "--dir", PROVIDED_HOME, "--ro-bind", provided, command[at]]
    # The whole sandbox (every process, and the /tmp it writes) in one cgroup where the machine
    # has one: together no more than one process's address space plus the scratch /tmp.
    cap = _memory_cap(max(limits.address_space, memory or 0) + limits.scratch, root)
    return [*cap, *prefix, *mounts, "--", *drop, tools["prlimit"], *rlimits, "--", *command]


_cgroup_probe: dict[bool, bool] = {}


def memory_cgroup_available(root: bool | None = None) -> bool:
    """Whether a cgroup can cap the whole sandbox's memory here: the unified (v2) hierarchy
    with its memory controller, and a systemd that makes a scope with ``MemoryMax`` for this
    user (``systemd-run --user`` needs a user session with the memory controller delegated,
    as systemd gives every user session by default). Probed once per process."""
    root = os.geteuid() == 0 if root is None else root
    if root not in _cgroup_probe:
        _cgroup_probe[root] = _probe_cgroup(root)
    return _cgroup_probe[root]


def _probe_cgroup(root: bool) -> bool:
    try:
        controllers = Path("/sys/fs/cgroup/cgroup.controllers").read_text().split()
    except OSError:  # cgroup v1, or a hybrid layout whose memory controller is v1's
        return False
    run = shutil.which("systemd-run", path="/usr/bin:/bin")
    if "memory" not in controllers or not run:
        return False
    probe = [*_scope(run, 64 << 20, root), "/bin/true"]
    try:
        done = subprocess.run(probe, stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _scope(run: str, limit: int, root: bool) -> list[str]:
    user = [] if root else ["--user"]
    return [
        run,
        *user,
        "--scope",
        "--quiet",
        "--collect",
        "-p",
        f"MemoryMax={limit}",
        "-p",
        "MemorySwapMax=0",
        "--",
    ]


def _memory_cap(limit: int, root: bool) -> list[str]:
    """The command prefix that puts the sandbox in a transient cgroup of ``limit`` bytes (its
    processes and their /tmp together; the kernel kills inside it beyond that), or nothing
    where the machine cannot (docs/instructors.md: then the per-process limits bound it)."""
    if not memory_cgroup_available(root):
        return []
    run = shutil.which("systemd-run", path="/usr/bin:/bin")
    return _scope(run, limit, root) if run else []


def _option(command: list[str], name: str) -> int | None:
    try:
        return int(command[command.index(name) + 1])
    except (ValueError, IndexError):
        return None


def _bwrap_prefix(bwrap: str, root: bool, limits: SandboxLimits) -> list[str]:
    """bwrap and every mount except the target: system, Python, scratch, /proc, /dev."""
    args = [
        bwrap,
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "grading",
    ]
    if root:
        # Privileged bwrap (no user namespace: the kernel would map the sandbox's user to
        # root again); setpriv needs these three to switch to the sandbox's own user.
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
    else:
        args += ["--unshare-user"]
    for top in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for path in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime"):
        args += ["--ro-bind-try", path, path]
    # /proc, /dev and the scratch /tmp first: a virtualenv under /tmp is then bound on top.
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--perms", "1777", "--size", str(limits.scratch), "--tmpfs", "/tmp"]
    made: set[str] = {"/", "/usr", "/etc", "/tmp", "/proc", "/dev"}
    for path in _python_paths():
        args += _parents(path, made) + ["--ro-bind", path, path]
    for path in _hidden_packages():
        args += ["--perms", "0555", "--size", "4096", "--tmpfs", path]
    for name in ("GPT2_TIKTOKEN", "TIKTOKEN_CACHE_DIR"):  # the vocabulary, when set
        value = os.environ.get(name)
        if value and os.path.exists(value) and not _covered(os.path.realpath(value)):
            path = os.path.realpath(value)
            args += _parents(path, made) + ["--ro-bind", path, path]
    args += ["--chdir", "/tmp", "--setenv", "HOME", "/tmp", "--setenv", "TMPDIR", "/tmp"]
    args += ["--setenv", "PATH", "/usr/bin:/bin"]
    return args


def _parents(path: str, made: set[str]) -> list[str]:
    """``--dir`` for every missing ancestor, world-traversable (privileged bwrap makes 0700)."""
    args: list[str] = []
    parts = Path(path).parts
    for i in range(2, len(parts)):
        ancestor = str(Path(*parts[:i]))
        if ancestor not in made:
            made.add(ancestor)
            args += ["--perms", "0755", "--dir", ancestor]
    return args


def _python_paths() -> list[str]:
    """The interpreter's installation and virtualenv (stdlib, site-packages), nothing else."""
    paths = {
        os.path.realpath(p)
        for p in (sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix)
    }
    paths.add(os.path.dirname(os.path.realpath(sys.executable)))
    for entry in site.getsitepackages():
        paths.add(os.path.realpath(entry))
    paths = {p for p in paths if os.path.isdir(p) and p != "/"}
    # Keep the outermost of nested paths; /usr is already there.
    kept = sorted(
        p
        for p in paths
        if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in paths)
        and not p.startswith("/usr/")
        and p != "/usr"
    )
    return kept


def _covered(path: str) -> bool:
    return (
        path == "/usr"
        or path.startswith("/usr/")
        or any(path == p or path.startswith(p + "/") for p in _python_paths())
    )


def _hidden_packages() -> list[str]:
    """This project's packages should they be installed in site-packages, and the libraries
    the lesson process does without (graders/worker/absent.py): masked, empty."""
    from .worker.absent import ABSENT

    found = []
    for entry in site.getsitepackages():
        for name in (*PROJECT_PACKAGES, *ABSENT):
            path = os.path.join(os.path.realpath(entry), name)
            if os.path.isdir(path):
                found.append(path)
    return found


def _private_copy(target: Path, limits: SandboxLimits) -> str:
    """A world-readable snapshot of ``target``'s regular files (no symlinks, devices, FIFOs),
    in a folder only this user may enter.

    Removed when this process exits (a process killed outright leaves it; instructor
    autograde's next run removes it, by the process id in its name). World-readable because,
    as root, the sandboxed code runs as a user of its own; inside a 0700 folder because no other
    user of the machine may read a student's code: the sandbox binds the copy itself, so its
    user never needs to pass through the folder above it.
    """
    holder = tempfile.mkdtemp(prefix=f"grading-sandbox-{os.getpid()}-")  # 0700
    root = os.path.join(holder, "copy")
    os.mkdir(root)
    os.chmod(root, 0o755)
    _copies.append(root)
    if len(_copies) == 1:
        atexit.register(_remove_copies)
    _fill(root, target, limits)
    return root


def refresh_copy(copy: str, target: Path, limits: SandboxLimits = LIMITS) -> None:
    """Make the private copy ``copy`` (of a sandbox this process started) a snapshot of
    ``target`` as it is now, in place: the sandbox binds the folder itself, so a kept worker's
    next lesson process sees the new files. Only while no lesson process of it runs."""
    if copy not in _copies:
        raise ValueError(f"{copy} is not a private copy this process made")
    for entry in os.scandir(copy):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)
    _fill(copy, Path(target).resolve(), limits)


def _fill(root: str, target: Path, limits: SandboxLimits) -> None:
    """Copy ``target``'s regular files into the empty folder ``root``, within the limits."""
    total = 0
    for folder, dirs, files in os.walk(target, followlinks=False):
        rel = os.path.relpath(folder, target)
        dest = os.path.normpath(os.path.join(root, rel))
        dirs[:] = sorted(
            d for d in dirs if d != "__pycache__" and not os.path.islink(os.path.join(folder, d))
        )
        for d in dirs:
            os.mkdir(os.path.join(dest, d), 0o755)
        for name in sorted(files):
            source = os.path.join(folder, name)
            try:
                info = os.lstat(source)
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode) or info.st_size > limits.copy_file:
                continue
            if total + info.st_size > limits.copy_total:
                continue
            total += info.st_size
            try:
                shutil.copyfile(source, os.path.join(dest, name), follow_symlinks=False)
            except OSError:
                continue
            os.chmod(os.path.join(dest, name), 0o644)


def _remove_copies() -> None:
    while _copies:
        shutil.rmtree(os.path.dirname(_copies.pop()), ignore_errors=True)


def _probe(prefix: list[str], drop: list[str], prlimit: str) -> None:
    """Start an empty sandbox once per process, so that a machine that cannot gives a clear
    error (no bubblewrap, user namespaces disabled, ...) instead of a dead worker."""
    key = (tuple(prefix[:1]), bool(drop))
    if key not in _probed:
        try:
            result = subprocess.run(
                [*prefix, "--", *drop, prlimit, "--nproc=8", "--", "/bin/true"],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=60,
            )
            _probed[key] = (
                None
                if result.returncode == 0
                else (
                    result.stderr.decode("utf-8", "replace").strip() or f"exit {result.returncode}"
                )
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            _probed[key] = str(error)
    if _probed[key] is not None:
        raise SandboxUnavailable(
            f"bubblewrap cannot create the grading sandbox here: {_probed[key]} "
            "(it needs user namespaces, or root; see docs/instructors.md)"
        )
