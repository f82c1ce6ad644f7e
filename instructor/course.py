"""The nbgrader course directory and its configuration.

``build/nbgrader/`` (git-ignored) is a standard nbgrader course directory:

    nbgrader_config.py      generated; lets plain ``nbgrader ...`` commands run here too
    gradebook.db            nbgrader's SQLite gradebook (or $COURSE_GRADEBOOK_URL: PostgreSQL)
    source/LESSON/          one assignment per lesson (built from the manifest)
    release/LESSON/         what students get (``nbgrader generate_assignment``)
    downloaded/LESSON/archive/   zips to collect (``nbgrader zip_collect``)
    submitted/STUDENT/LESSON/    submissions, nbgrader's layout
    autograded/ feedback/   nbgrader's outputs
    results/STUDENT/LESSON.json  the grading harness's reports (ours; instructors only)
    grades.csv grades-by-check.csv   exports

Everything that configures nbgrader is in :func:`configure`, used both by our commands
(through the API) and by the generated nbgrader_config.py.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.cli import one_line
from core.manifest import ROOT, Manifest, load_manifest

COURSE_ID = "gpt-from-the-ground-up"
DEFAULT_COURSE = ROOT / "build" / "nbgrader"
PACKAGE = "exercises"  # the student's package inside every assignment
CELL_TIMEOUT = 1800  # seconds; a cell may grade a whole lesson (plain nbgrader autograde)
GRADEBOOK_ENV = "COURSE_GRADEBOOK_URL"  # an SQLAlchemy URL; default: COURSE/gradebook.db


@dataclass(frozen=True)
class Course:
    root: Path
    db: str | None = None  # the gradebook's URL, when not the default (see db_url)

    @classmethod
    def at(cls, root: Path | str | None = None, db: str | None = None) -> Course:
        return cls(Path(root if root is not None else DEFAULT_COURSE).resolve(), db)

    @property
    def source(self) -> Path:
        return self.root / "source"

    @property
    def release(self) -> Path:
        return self.root / "release"

    @property
    def submitted(self) -> Path:
        return self.root / "submitted"

    @property
    def autograded(self) -> Path:
        return self.root / "autograded"

    @property
    def feedback(self) -> Path:
        return self.root / "feedback"

    @property
    def downloaded(self) -> Path:
        return self.root / "downloaded"

    @property
    def results(self) -> Path:
        return self.root / "results"

    @property
    def gradebook(self) -> Path:
        return self.root / "gradebook.db"

    @property
    def db_url(self) -> str:
        """nbgrader's gradebook: ``$COURSE_GRADEBOOK_URL`` (any SQLAlchemy URL, such as
        ``postgresql+psycopg://user@host/course`` when several machines write to it), else the
        SQLite file in the course directory."""
        return self.db or os.environ.get(GRADEBOOK_ENV) or f"sqlite:///{self.gradebook}"

    def gradebook_name(self) -> str:
        """The gradebook's URL without its password, for messages."""
        from sqlalchemy.engine import make_url

        return make_url(self.db_url).render_as_string(hide_password=True)

    def lessons(self) -> list[str]:
        """The lessons released so far (assignments in source/)."""
        if not self.source.is_dir():
            return []
        return sorted(p.name for p in self.source.iterdir() if (p / f"{p.name}.ipynb").is_file())

    def students(self, lesson: str | None = None) -> list[str]:
        if not self.submitted.is_dir():
            return []
        return sorted(
            p.name
            for p in self.submitted.iterdir()
            if p.is_dir() and (lesson is None or (p / lesson).is_dir())
        )


class SetupError(Exception):
    """The command cannot run as set up (one line, naming the fix)."""


class GradebookError(SetupError):
    """The gradebook cannot be used for this course."""


def check_gradebook(course: Course, lessons: list[str], required: Iterable[str] = ()) -> None:
    """Refuse a gradebook that belongs to another course (another nbgrader course id, or
    assignments that are not lessons of this course), or that lacks a ``required`` lesson."""
    from sqlalchemy import create_engine, inspect, text

    engine = create_engine(course.db_url)
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
            f"cannot open the gradebook {course.gradebook_name()}: {first} "
            f"(check --gradebook / ${GRADEBOOK_ENV})"
        ) from None
    finally:
        engine.dispose()
    others = sorted(courses - {COURSE_ID, "default_course"})
    known = {lesson.slug for lesson in load_manifest().lessons} | set(lessons)
    strangers = sorted(names - known)
    if others or strangers:
        what = f"course {others[0]!r}" if others else f"assignment {strangers[0]!r}"
        raise GradebookError(
            f"the gradebook {course.gradebook_name()} belongs to another course ({what} is not "
            f"part of {COURSE_ID}): point --gradebook (or ${GRADEBOOK_ENV}) at this course's "
            "gradebook, or use a new --course folder"
        )
    missing = sorted(set(required) - names)
    if missing:
        raise GradebookError(
            f"lesson {missing[0]!r} is not in the gradebook {course.gradebook_name()}: release "
            f"it with this gradebook (nox -s release -- {missing[0]} --gradebook URL)"
        )


def kernel_environment() -> None:
    """The kernels nbgrader starts never import from the submission folder, and find the
    instructors' graders: ``PYTHONSAFEPATH`` keeps the working directory off ``sys.path`` (a
    student's ``ipykernel_launcher.py`` or ``graders/`` would otherwise win), and the project
    root goes first on ``PYTHONPATH``. Kernels inherit this process's environment."""
    os.environ["PYTHONSAFEPATH"] = "1"
    # nbgrader runs `alembic` (a console script of this environment) to create the gradebook.
    bin_dir = os.path.dirname(sys.executable)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *[p for p in paths if p != str(ROOT)]])


def configure(c: Any, root: Course | Path | str, manifest: Manifest | None = None) -> Any:
    """Set every nbgrader option of this course on the traitlets config ``c``."""
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
    from nbgrader.preprocessors import (
        CheckCellMetadata,
        ClearOutput,
        DeduplicateIds,
        GetGrades,
        OverwriteCells,
        OverwriteKernelspec,
    )

    from .collect import SubmissionCollector
    from .preprocessors import HideHiddenTests, RebuildFromGradebook

    course = root if isinstance(root, Course) else Course.at(root)
    manifest = manifest or load_manifest()
    c.CourseDirectory.root = str(course.root)
    c.CourseDirectory.course_id = COURSE_ID
    c.CourseDirectory.db_url = course.db_url
    c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "build"]
    # The student's lesson module is the one file of the assignment that is theirs: every
    # other file (graders, the rest of the package, the manifest) is restored from source/.
    c.Autograde.exclude_overwriting = {
        lesson.slug: [f"{PACKAGE}/{lesson.module}.py"] for lesson in manifest.lessons
    }
    c.Autograde.create_student = True
    c.Autograde.sanitize_preprocessors = [
        ClearOutput,
        RebuildFromGradebook,
        DeduplicateIds,
        OverwriteKernelspec,
        OverwriteCells,
        CheckCellMetadata,
    ]
    c.Execute.timeout = CELL_TIMEOUT
    c.Execute.extra_arguments = [
        "--HistoryManager.hist_file=:memory:",
        "--InteractiveShellApp.ignore_cwd=True",
        "--IPKernelApp.log_level=ERROR",
    ]
    c.GenerateFeedback.preprocessors = [GetGrades, HideHiddenTests, CSSHTMLHeaderPreprocessor]
    c.ZipCollectApp.collector_plugin = SubmissionCollector
    c.FileNameCollectorPlugin.valid_ext = [".ipynb", ".py"]
    c.ExtractorPlugin.zip_ext = [".zip"]
    kernel_environment()
    return c


def nbgrader_config(course: Course | Path | str) -> Any:
    from traitlets.config import Config

    return configure(Config(), course)


def late_penalty_plugin(course: Course) -> Any:
    """nbgrader's late-submission plugin, configured as nbgrader's own commands would be by the
    instructor's ``nbgrader_config.py`` (or ``.json``) in Jupyter's config directories
    (``jupyter --paths``): ``c.LateSubmissionPlugin.penalty_method = "zero"``, or
    ``c.AssignLatePenalties.plugin_class = "late.SubMarks"`` for a plugin of one's own in
    ``late.py`` in the course folder, as nbgrader's documentation places it. The course's own
    settings have none (and :func:`configure` is not run here: it sets the kernels'
    environment). Autograde asks it for each late submission's penalty."""
    from jupyter_core.paths import jupyter_config_path
    from nbgrader.preprocessors import AssignLatePenalties
    from traitlets.config import Config
    from traitlets.config.loader import (
        ConfigFileNotFound,
        JSONFileConfigLoader,
        PyFileConfigLoader,
    )

    config = Config()
    for directory in reversed(jupyter_config_path()):  # the most important one merges last
        for loader in (JSONFileConfigLoader, PyFileConfigLoader):
            name = "nbgrader_config." + ("json" if loader is JSONFileConfigLoader else "py")
            try:
                config.merge(loader(name, path=directory).load_config())
            except ConfigFileNotFound:
                continue
            except Exception as error:  # noqa: BLE001 - the instructor's file, any mistake
                raise SetupError(
                    f"{Path(directory) / name}: {one_line(error)} "
                    "(fix or remove that file; nbgrader's own commands read it too)"
                ) from None
    added = str(course.root) not in sys.path
    if added:
        sys.path.insert(0, str(course.root))
    try:
        late = AssignLatePenalties(config=config)
        late.init_plugin()
    except Exception as error:  # noqa: BLE001 - a plugin class that cannot be loaded or made
        raise SetupError(
            f"the late-submission plugin cannot be loaded: {one_line(error)} (put its "
            f"module in {course.root} or on PYTHONPATH, or fix c.AssignLatePenalties."
            "plugin_class in your nbgrader_config.py)"
        ) from None
    finally:
        if added:
            sys.path.remove(str(course.root))
    return late.plugin_inst


CONFIG_FILE = """\
# Generated by `python -m instructor release`: edit instructor/course.py,
# not this file. It lets plain nbgrader commands (formgrader, autograde, ...) run in this
# folder with the course's settings.
import sys

sys.path.insert(0, {root!r})
from instructor.course import configure  # noqa: E402

configure(c, {course!r})  # noqa: F821 - nbgrader provides c
"""


def write_config_file(course: Course) -> Path:
    path = course.root / "nbgrader_config.py"
    course.root.mkdir(parents=True, exist_ok=True)
    path.write_text(CONFIG_FILE.format(root=str(ROOT), course=str(course.root)))
    return path


def api(course: Course) -> Any:
    """nbgrader's API for this course, configured as above, logging quietly."""
    import warnings

    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    # nbgrader 0.9 with SQLAlchemy 2.x: harmless autoflush warnings on every autograde.
    warnings.filterwarnings("ignore", message=".*not in session.*")
    config = nbgrader_config(course)
    coursedir = CourseDirectory(config=config)
    return NbGraderAPI(coursedir=coursedir, config=config)
