"""A submission with no exercise code of its own, which tries to borrow an implementation.

Every function of a borrowing module looks for an implementation of its own name to call: in
the modules loaded in its process, the garbage collector, the stack's frames and, when asked,
the files it can read (trusted.py, oracles.py, dependencies.py, solutions' module of the same
name), and calls the first one that answers. The graders must give it nothing:
tests/graders/test_hostile.py grades it directly, tests/instructor/test_autograde_sandboxed.py
through autograde.
"""

from __future__ import annotations

from pathlib import Path

BORROWER = """
import gc, importlib.util, os, sys
import torch
from torch.utils.data import Dataset

SEARCH_FILES = {search_files}
NEEDLES = ("grader", "trusted", "oracle", "solution", "dependenc", "answer", "reference")
FILES = ("trusted.py", "oracles.py", "dependencies.py", "{module}.py")
_found = {{}}


def _mine(obj):
    init = getattr(obj, "__init__", None)
    code = getattr(obj, "__code__", None) or getattr(init, "__code__", None)
    return code is not None and code.co_filename == __file__


def _files():
    roots = {{os.getcwd(), os.path.expanduser("~"), "/tmp", "/work", "/root", "/home", "/srv",
              "/opt", os.path.dirname(os.path.dirname(__file__)), sys.prefix, *sys.path}}
    seen = 0
    for root in roots:
        for folder, dirs, names in os.walk(root):
            seen += len(names)
            if seen > 200000 or folder.count(os.sep) > 8:
                dirs[:] = []
            dirs[:] = [d for d in dirs if not d.startswith(".") or d == ".nox"]
            for name in names:
                path = os.path.join(folder, name)
                if name in FILES and os.path.realpath(path) != os.path.realpath(__file__):
                    yield path


_listed = []


def _file_list():  # walked once per process: every name is looked for in all the files found
    if not _listed:
        _listed.append(list(_files()))
    return _listed[0]


def _candidates(name):
    found = []
    for module in list(sys.modules.values()):
        try:
            obj = vars(module).get(name)
        except Exception:
            continue
        if callable(obj) and not _mine(obj):
            found.append(obj)
    for obj in gc.get_objects():
        try:
            if callable(obj) and getattr(obj, "__name__", None) == name and not _mine(obj):
                found.append(obj)
        except Exception:
            pass
    for frame in sys._current_frames().values():
        while frame is not None:
            for space in (frame.f_globals, frame.f_locals):
                obj = space.get(name)
                if callable(obj) and not _mine(obj):
                    found.append(obj)
            frame = frame.f_back
    if SEARCH_FILES:
        for path in _file_list():
            try:
                spec = importlib.util.spec_from_file_location("borrowed_" + str(len(found)), path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                obj = getattr(module, name, None)
            except BaseException:
                continue
            if callable(obj):
                found.append(obj)
    found.sort(key=lambda o: not any(n in repr(o) for n in NEEDLES))
    return found


def _borrow(name, args, kwargs):
    if name not in _found:
        _found[name] = _candidates(name)
    for candidate in _found[name]:
        try:
            return candidate(*args, **kwargs)
        except BaseException:
            continue
    raise LookupError("nothing to borrow for " + name)
"""

FUNCTION = """

def {name}(*args, **kwargs):
    return _borrow({name!r}, args, kwargs)
"""

CLASS = """

class {name}(Dataset):
    def __init__(self, *args, **kwargs):
        self.inner = _borrow({name!r}, args, kwargs)

    def __len__(self):
        return len(self.inner)

    def __getitem__(self, i):
        return self.inner[i]
"""


def borrowing_module(
    module: str, functions: list[str] | tuple[str, ...], search_files: bool
) -> str:
    """The source of a lesson module whose every function borrows."""
    source = BORROWER.format(search_files=search_files, module=module)
    for name in functions:
        source += (CLASS if name[0].isupper() else FUNCTION).format(name=name)
    return source


def borrowing_submission(directory: Path, search_files: bool) -> Path:
    """A package whose every lesson function borrows (see BORROWER)."""
    from core.manifest import load_manifest

    target = directory / "borrower"
    target.mkdir()
    (target / "__init__.py").write_text("")
    for lesson in load_manifest().lessons:
        source = borrowing_module(lesson.module, lesson.functions, search_files)
        (target / f"{lesson.module}.py").write_text(source)
    return target
