"""Which gradebook a course uses: given once, remembered, never printed with its password.

The URL (any SQLAlchemy URL, such as ``postgresql+psycopg://user@host/course`` when several
machines write to it) comes from ``--gradebook``, else ``$COURSE_GRADEBOOK_URL``, else the one
the course's last release used (``COURSE/gradebook-url``, readable by its owner only), else the
SQLite file ``COURSE/gradebook.db``. Release remembers the URL it released into, so every later
command (``report`` too) reads the same gradebook without being told again. A command given a
gradebook that lacks the course's lessons (a switch to a new database) is refused with what
to do: release into it, or copy the old one's data over.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from core.atomic import atomic_write

from .errors import SetupError

GRADEBOOK_ENV = "COURSE_GRADEBOOK_URL"
REMEMBERED = "gradebook-url"  # in the course folder; written by release


class GradebookError(SetupError):
    """The gradebook cannot be used for this course."""


def default_url(root: Path) -> str:
    return f"sqlite:///{root / 'gradebook.db'}"


def remembered(root: Path) -> str | None:
    """The URL the course's last release used, if it was not the default."""
    try:
        return (root / REMEMBERED).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def given(option: str | None) -> str | None:
    """The URL this command was given: the option, else the environment variable."""
    return option or os.environ.get(GRADEBOOK_ENV) or None


def resolve(root: Path, option: str | None = None) -> str:
    return normalized(given(option) or remembered(root) or default_url(root))


def normalized(url: str) -> str:
    """``url`` as SQLAlchemy names its scheme: ``postgres://`` (Heroku's and libpq's spelling,
    which SQLAlchemy refuses) is ``postgresql://``."""
    return re.sub(r"^postgres(?=[:+])", "postgresql", url)


def remember(root: Path, url: str) -> None:
    """Release's record of the course's gradebook (0600: the URL may hold a password)."""
    path = root / REMEMBERED
    if url == default_url(root):
        path.unlink(missing_ok=True)
    else:

        def owner_only(f: IO[bytes]) -> None:
            os.fchmod(f.fileno(), 0o600)  # before the URL is in it
            f.write(url.encode() + b"\n")

        atomic_write(path, owner_only)


def shown(url: str) -> str:
    """The URL without its password, for messages."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an unparsable URL is shown by its scheme only
        return url.split(":", 1)[0] + ":..."


def check_gradebook(
    url: str, course_id: str, known: set[str], required: Iterable[str] = ()
) -> None:
    """Refuse a gradebook that belongs to another course (another nbgrader course id, or
    assignments that are not in ``known``), or that lacks a ``required`` lesson."""
    from sqlalchemy import create_engine, inspect, text

    engine = create_engine(url)
    try:
        with engine.connect() as db:
            courses: set[str] = set()
            names: set[str] = set()
            if {"course", "assignment"} <= set(inspect(db).get_table_names()):
                courses = {row[0] for row in db.execute(text("SELECT id FROM course"))}
                names = {row[0] for row in db.execute(text("SELECT name FROM assignment"))}
    except Exception as error:  # noqa: BLE001 - any driver's error, in one line
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise GradebookError(
            f"cannot open the gradebook {shown(url)}: {first} "
            f"(check --gradebook / ${GRADEBOOK_ENV})"
        ) from None
    finally:
        engine.dispose()
    others = sorted(courses - {course_id, "default_course"})
    strangers = sorted(names - known)
    if others or strangers:
        what = f"course {others[0]!r}" if others else f"assignment {strangers[0]!r}"
        raise GradebookError(
            f"the gradebook {shown(url)} belongs to another course ({what} is not "
            f"part of {course_id}): point --gradebook (or ${GRADEBOOK_ENV}) at this course's "
            "gradebook, or use a new --course folder"
        )
    missing = sorted(set(required) - names)
    if missing:
        raise GradebookError(
            f"lesson {missing[0]!r} is not in the gradebook {shown(url)}: to switch to this "
            f"gradebook, release into it (${GRADEBOOK_ENV}=URL nox -s release; later commands "
            "then use it) or copy the old gradebook's data into it; else leave --gradebook "
            f"and ${GRADEBOOK_ENV} unset to use the course's"
        )
