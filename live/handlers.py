"""The course server's routes (the built site under ``/course/``, the grading report's API) and
the code a page's kernel runs first; :mod:`live.server_extension` plugs them into Jupyter."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SITE = ROOT / "build" / "site"
PREFIX = "/course/"


def kernel_setup_code(exercises: Path | None, output_limit: int) -> str:
    """What a page's kernel runs before its first block."""
    target = "None" if exercises is None else repr(str(exercises.resolve()))
    return (
        "import live.kernel_setup as _course_setup\n"
        f"_course_setup.setup(exercises={target}, output_limit={output_limit})\n"
        "del _course_setup\n"
    )


def read_report(path: Path) -> dict[str, Any]:
    """The report and when it was written, or why there is none (never raises)."""
    try:
        stat = path.stat()
        report = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"report": None, "graded": None, "error": None}
    except (OSError, ValueError) as error:
        return {"report": None, "graded": None, "error": f"cannot read {path}: {error}"}
    graded = datetime.fromtimestamp(stat.st_mtime, UTC).isoformat(timespec="seconds")
    return {"report": report, "graded": graded, "error": None}


def make_handlers(
    *, site: Path, exercises: Path, report: Path, timeout: float, output_limit: int
) -> list[tuple[str, type, dict[str, Any]]]:
    """The course's routes: the site under /course/, the grading report's API."""
    from jupyter_server.base.handlers import APIHandler, JupyterHandler
    from tornado import web

    site = site.resolve()
    live = {
        "timeout": timeout,
        "outputLimit": output_limit,
        "exercises": _shown(exercises),
        "setup": {
            "reference": kernel_setup_code(None, output_limit),
            "mine": kernel_setup_code(exercises, output_limit),
        },
        "report": "/course-api/report",
    }

    class SiteHandler(JupyterHandler, web.StaticFileHandler):
        """The built site; HTML pages carry the live configuration in a meta element."""

        def compute_etag(self) -> str | None:
            return None  # pages differ per login (the XSRF token); no-cache revalidates

        # tornado's stubs give authenticated's result the signature (*Any, **Any) -> Awaitable
        # | None, which mypy cannot match with StaticFileHandler.get; the signature is get's.
        @web.authenticated
        async def get(self, path: str, include_body: bool = True) -> None:  # type: ignore[override]
            target = (site / path).resolve()
            if not target.is_relative_to(site):
                raise web.HTTPError(404)
            if target.is_dir():
                if path and not path.endswith("/"):
                    self.redirect(f"{PREFIX}{path}/")
                    return
                target = target / "index.html"
            if target.suffix != ".html":
                await web.StaticFileHandler.get(self, path, include_body)
                return
            try:
                text = target.read_text(encoding="utf-8")
            except OSError:
                raise web.HTTPError(404) from None
            config = dict(live, xsrf=self.xsrf_token.decode())
            meta = f"<meta name=\"course-live\" content='{_attr(json.dumps(config))}'>"
            self.set_header("Content-Type", "text/html; charset=UTF-8")
            self.set_header("Cache-Control", "no-cache")
            self.finish(text.replace("</head>", meta + "</head>", 1))

    class ReportHandler(APIHandler):
        @web.authenticated
        def get(self) -> None:
            self.set_header("Cache-Control", "no-store")
            self.finish(json.dumps(read_report(report)))

    return [
        (r"/course", web.RedirectHandler, {"url": PREFIX}),
        (r"/course/(.*)", SiteHandler, {"path": str(site), "default_filename": "index.html"}),
        (r"/course-api/report", ReportHandler, {}),
    ]


def _shown(path: Path) -> str:
    """A package directory as the page names it: relative to the repository when inside it."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace("'", "&#39;").replace("<", "&lt;")
