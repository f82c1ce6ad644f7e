"""``python -m live.course_server``: the course site on your machine, runnable and live.

    python -m live.course_server                  # build/site at http://127.0.0.1:8008/course/
    python -m live.course_server --exercises DIR  # "with my code" uses another package

It is a Jupyter server (``jupyter_server``) with one extension, :mod:`live.server_extension`
(an ``ExtensionApp``), which adds three things:

- ``/course/...`` serves the built site (``mkdocs build``), after login by the token in the
  printed address. Its pages get a ``<meta name="course-live">`` that tells
  ``assets/javascripts/run.js`` the server is there: every example block gets Run and Edit,
  executing in a real IPython kernel started through Jupyter's own kernel API
  (``/api/kernels`` and its websocket), one kernel per open page, with the repository root as
  its working directory (so ``solutions``, ``exercises`` and the provided code import);
- the code each page's kernel runs first (``live.kernel_setup``): the examples' lessons
  (``gpt.chapter``) are the reference ``solutions``, or with the page's "With my code" switch
  the student's package;
- ``/course-api/report`` returns the latest grading report (``nox -s grade`` writes
  build/grading-report.json), which the progress page and the exercise boxes poll.

It listens on 127.0.0.1 only, with a token; kernels start when a page first runs a block,
stop when the page is left or closed (the page deletes its kernel) and otherwise after
``--idle`` seconds without activity; no other Jupyter server extension is loaded (the
extension says so: ``load_other_extensions = False``).
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from pathlib import Path

from core.cli import Parser
from core.manifest import DEFAULT_REPORT

from .handlers import DEFAULT_SITE, PREFIX, ROOT


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = Parser(
        prog="python -m live.course_server",
        description="Serve the built course site with Run buttons, 'with my code' and live "
        "progress, on 127.0.0.1 only.",
    )
    parser.add_argument("--site", type=Path, default=DEFAULT_SITE, help="the built site")
    parser.add_argument("--port", type=int, default=8008, help="port on 127.0.0.1")
    parser.add_argument(
        "--exercises",
        type=Path,
        default=ROOT / "exercises",
        help="the package 'With my code' runs (default: exercises/)",
    )
    parser.add_argument(
        "--report", type=Path, default=DEFAULT_REPORT, help="the grading report to follow"
    )
    parser.add_argument(
        "--timeout", type=float, default=120, help="seconds a block may run before it is stopped"
    )
    parser.add_argument(
        "--output-limit", type=int, default=500_000, help="characters a block may print"
    )
    parser.add_argument(
        "--idle", type=int, default=1800, help="seconds before an idle kernel is stopped"
    )
    parser.add_argument(
        "--token", default=None, help="the login token (default: a random one, printed)"
    )
    parser.add_argument("--open", action="store_true", help="open the site in a browser")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    if not (options.site / "index.html").is_file():
        print(
            f"error: no built site in {options.site}: build it first (nox -s docs)",
            file=sys.stderr,
        )
        return 2
    if not (options.exercises / "__init__.py").is_file():
        print(f"error: {options.exercises} is not a package directory", file=sys.stderr)
        return 2
    from .server_extension import make_server

    token = options.token or secrets.token_hex(24)
    app = make_server(
        [
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={options.port}",
            "--ServerApp.port_retries=0",
            "--ServerApp.open_browser=False",
            "--ServerApp.allow_root=True",  # containers and CI run as root
            f"--ServerApp.root_dir={ROOT}",
            f"--IdentityProvider.token={token}",
            f"--MappingKernelManager.cull_idle_timeout={options.idle}",
            "--MappingKernelManager.cull_interval=60",
            "--MappingKernelManager.cull_connected=True",
            # Kernels talk to the server over Unix sockets where there are some: nothing
            # listens on a TCP port but the server itself.
            *(["--KernelManager.transport=ipc"] if os.name == "posix" else []),
            f"--CourseServer.site={options.site}",
            f"--CourseServer.exercises={options.exercises}",
            f"--CourseServer.report={options.report}",
            f"--CourseServer.timeout={options.timeout}",
            f"--CourseServer.output_limit={options.output_limit}",
        ]
    )
    url = f"http://127.0.0.1:{app.port}{PREFIX}?token={token}"
    print(f"The course, runnable: {url}", flush=True)
    if options.open:
        import webbrowser

        webbrowser.open(url)
    app.start()
    return 0


if __name__ == "__main__":
    sys.exit(main())
