"""The live course (`nox -s course`): code run by the Jupyter server and each page's kernel."""

from __future__ import annotations

from typing import Any


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    """Where jupyter_server finds the course's extension (its documented entry point)."""
    from .server_extension import CourseServer

    return [{"module": "live.server_extension", "app": CourseServer}]
