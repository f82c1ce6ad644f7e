"""The course server as a Jupyter server extension (jupyter_server's documented ``ExtensionApp``).

:class:`CourseServer` adds the course's handlers (:func:`live.course_server.make_handlers`)
to a stock ``ServerApp`` and, launched by ``python -m live.course_server``, keeps every other
installed extension (JupyterLab's, nbgrader's, ...) out: ``load_other_extensions = False``.
Its options are traits (``--CourseServer.site=DIR``, ...), given on the command line by
:func:`live.course_server.main`, so that no Jupyter config file can change them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jupyter_server.extension.application import ExtensionApp
from jupyter_server.serverapp import ServerApp
from traitlets import Float, Int, Unicode

from .course_server import DEFAULT_SITE, PREFIX, ROOT, make_handlers


class CourseServer(ExtensionApp):
    name = "course"
    description = "The course site with Run buttons, 'with my code' and live progress"
    extension_url = PREFIX  # the landing page
    load_other_extensions = False

    site = Unicode(str(DEFAULT_SITE), help="the built site").tag(config=True)
    exercises = Unicode(str(ROOT / "exercises"), help="the package 'With my code' runs").tag(
        config=True
    )
    report = Unicode("", help="the grading report the pages follow").tag(config=True)
    timeout = Float(120.0, help="seconds a block may run before it is stopped").tag(config=True)
    output_limit = Int(500_000, help="characters a block may print").tag(config=True)

    def initialize_handlers(self) -> None:
        self.handlers.extend(
            make_handlers(
                site=Path(self.site),
                exercises=Path(self.exercises),
                report=Path(self.report),
                timeout=self.timeout,
                output_limit=self.output_limit,
            )
        )


def make_server(argv: list[str]) -> ServerApp:
    """A Jupyter server with the course's extension and no other, initialized from ``argv``
    (``--ServerApp.port=...``, ``--CourseServer.site=...``); the caller starts it."""
    server: Any = CourseServer.initialize_server(argv=argv)
    return server
