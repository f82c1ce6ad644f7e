"""Starting a grading worker: its command line and its process.

Torch-free to import: ``python -m graders`` starts its worker before the checker imports torch,
pytest and the oracles (graders/pool.py's ``start_early``), so that the worker's import of
torch (seconds) and the checker's overlap instead of following each other.

The worker is ``python -I -c BOOTSTRAP ARGS`` (wrapped by graders/sandbox.py with
``--sandbox``, run as another user by graders/worker_user.py where one is named), with one end
of a Unix socket pair as its standard input. The bundle of graders/worker/'s sources is sent
there at once as one frame; the bootstrap reads it, loads it as the package ``grader_worker``
and runs ``serving.main()``. Loaded, the modules leave ``sys.modules`` (and the loader
``sys.meta_path``), and nothing of them is a global of ``__main__`` (only the frame of
``_start`` holds them): the student's code finds no grader_worker to import or rewrite.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from .sandbox import SANDBOX_HOME, worker_command
from .worker import limits
from .worker.framing import FRAME
from .worker_user import user_prefix

WORKER = Path(__file__).resolve().parent / "worker"
# The provided package (gpt/) beside graders/, in a checkout and in a release alike: the worker
# imports it for the lesson modules that use it (tokens: gpt.vocab).
PROVIDED = WORKER.parents[1] / "gpt"

# The frame's length is read as FRAME (worker/framing.py) reads it: 8 bytes, big-endian.
BOOTSTRAP = """\
def _start():
    import importlib.abc, importlib.util, json, os, struct, sys
    def read(n):
        data = b''
        while len(data) < n:
            chunk = os.read(0, n - len(data))
            if not chunk:
                raise SystemExit(3)
            data += chunk
        return data
    sources = json.loads(read(struct.unpack('>Q', read(8))[0]))
    class Bundle(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path=None, target=None):
            package, _, module = name.partition('.')
            if package == 'grader_worker' and (module or '__init__') in sources:
                return importlib.util.spec_from_loader(name, self, is_package=not module)
            return None
        def create_module(self, spec):
            return None
        def exec_module(self, module):
            name = module.__name__.partition('.')[2] or '__init__'
            code = compile(sources[name], '<grader worker: ' + name + '>', 'exec')
            exec(code, module.__dict__)
    bundle = Bundle()
    sys.meta_path.insert(0, bundle)
    try:
        serving = importlib.import_module('grader_worker.serving')
    finally:
        sys.meta_path.remove(bundle)
        for name in [name for name in sys.modules if name.partition('.')[0] == 'grader_worker']:
            del sys.modules[name]
    serving.main(sys.argv[1:])
_start()
"""


@functools.cache
def bundle() -> bytes:
    """graders/worker/'s sources, as the frame ``BOOTSTRAP`` reads. Read once per process,
    before any student code runs: rewriting the files later changes no worker of this one."""
    sources = {path.stem: path.read_text() for path in sorted(WORKER.glob("*.py"))}
    return json.dumps(sources).encode()


def environment(workdir: str) -> dict[str, str]:
    """The worker's whole environment: a small one, with ``workdir`` as its home."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    for name in ("GPT2_TIKTOKEN", "TIKTOKEN_CACHE_DIR"):  # where the vocabulary lives
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def command(
    target: Path, *, sandbox: bool, memory: int = limits.MEMORY, trace: bool = False
) -> list[str]:
    """The command line of a worker for the package folder ``target``. Sandboxed, each call
    makes a private copy of ``target`` that the command binds (graders/sandbox.py). With
    ``trace`` the worker readies the by-hand functions' tracer while the checker starts."""
    base = [
        sys.executable,
        "-I",
        "-c",
        BOOTSTRAP,
        "--memory",
        str(memory),
        *(("--provided", str(PROVIDED)) if PROVIDED.is_dir() else ()),
        *(("--trace",) if trace else ()),
        "--target",  # last: the sandbox rewrites the target's path to its bound copy
        str(target),
    ]
    prefix = [] if sandbox else user_prefix()
    return [*prefix, *worker_command(base, target, sandbox=sandbox)]


class Launched:
    """A worker process just started, its bundle sent (what the socket took of it at once;
    ``pending`` is the rest): the control socket, its standard error, its working directory,
    and the private copy of the target its sandbox binds (None unsandboxed)."""

    def __init__(self, command: list[str], source: bytes) -> None:
        self.workdir = tempfile.mkdtemp(prefix="grader-worker-")
        self.copy = _bound_copy(command)
        self.control, theirs = socket.socketpair()
        try:
            self.popen = subprocess.Popen(
                command,
                stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                cwd=self.workdir,
                env=environment(self.workdir),
                start_new_session=True,
                close_fds=True,
            )
        except OSError:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.control.close()
            raise
        finally:
            theirs.close()
        self.control.setblocking(False)
        frame = FRAME.pack(len(source)) + source
        try:
            sent = self.control.send(frame)
        except (BlockingIOError, BrokenPipeError):
            sent = 0  # the rest goes when the checker first talks to it
        self.pending = bytearray(frame[sent:])

    def kill(self) -> None:
        """The worker and everything it started (its process group), its files."""
        proc = self.popen
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.kill()
        except ProcessLookupError:
            pass
        proc.wait()
        for stream in (self.control, self.popen.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        shutil.rmtree(self.workdir, ignore_errors=True)


def _bound_copy(command: list[str]) -> str | None:
    """The private copy of the target that a sandboxed ``command`` binds read-only."""
    for at, word in enumerate(command[:-2]):
        if word == "--ro-bind" and command[at + 2].startswith(f"{SANDBOX_HOME}/"):
            return command[at + 1]
    return None
