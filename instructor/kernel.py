"""The environment of the kernels that grade notebooks, given to each kernel it starts.

A kernel never imports from the submission folder and finds the instructors' graders:
``PYTHONSAFEPATH`` keeps the working directory off ``sys.path`` (a student's
``ipykernel_launcher.py`` or ``graders/`` would otherwise win), and the project root goes first
on ``PYTHONPATH``. The environment is passed to the kernel when it starts (nbclient's
``start_kernel(env=...)``); the process that starts it keeps its own ``os.environ`` as it was.

nbclient starts a kernel by two paths: the asynchronous one, and the synchronous
``start_new_kernel`` that nbconvert's ``preprocess`` (and so ``nbgrader autograde``) takes,
which nbclient binds to its own asynchronous method when the class is defined. Both are
overridden here, so plain ``nbgrader autograde`` and formgrader's button get the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from jupyter_core.utils import run_sync
from nbgrader.preprocessors import Execute

from core.manifest import ROOT


def kernel_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) as a grading kernel gets it."""
    env = dict(os.environ if base is None else base)
    env["PYTHONSAFEPATH"] = "1"
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(ROOT)]
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *paths])
    return env


class CourseExecute(Execute):
    """nbgrader's Execute step, starting each kernel with :func:`kernel_environment`."""

    async def async_start_new_kernel(self, **kwargs: Any) -> None:
        kwargs.setdefault("env", kernel_environment())
        await super().async_start_new_kernel(**kwargs)

    start_new_kernel = run_sync(async_start_new_kernel)  # nbclient's binds its own method
