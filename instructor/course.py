"""The nbgrader course directory: where everything of a course lives.

``build/nbgrader/`` (git-ignored) is a standard nbgrader course directory:

    nbgrader_config.py      generated; lets plain ``nbgrader ...`` commands run here too
    gradebook.db            nbgrader's SQLite gradebook, unless another is configured
    gradebook-url           the gradebook release used, when not gradebook.db (owner only)
    source/LESSON/          one assignment per lesson (built from the manifest)
    release/LESSON/         what students get (``nbgrader generate_assignment``)
    downloaded/LESSON/archive/   zips to collect (``nbgrader zip_collect``)
    downloaded/LESSON/attempts/STUDENT/TIME/   earlier attempts, for the report's history
    submitted/STUDENT/LESSON/    submissions, nbgrader's layout
    autograded/ feedback/   nbgrader's outputs
    results/STUDENT/LESSON.json  the grading harness's reports (ours; instructors only)
    gradings.json           each grade's files and secret seed, failed gradings (owner only)
    grades.csv grades-by-check.csv   exports

The rest of the course's setup has a module each: the gradebook's URL (:mod:`.gradebook_url`),
nbgrader's options (:mod:`.nbgrader_settings`), the kernels' environment (:mod:`.kernel`) and
nbgrader's API with the generated config file (:mod:`.nbgrader_api`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from core.manifest import ROOT, load_manifest

from . import gradebook_url

COURSE_ID = "gpt-from-the-ground-up"
DEFAULT_COURSE = ROOT / "build" / "nbgrader"
PACKAGE = "exercises"  # the student's package inside every assignment


@dataclass(frozen=True)
class Course:
    root: Path
    db: str | None = None  # the gradebook's URL as given (see db_url)

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
        """nbgrader's gradebook (:func:`.gradebook_url.resolve`)."""
        return gradebook_url.resolve(self.root, self.db)

    def gradebook_name(self) -> str:
        """The gradebook's URL without its password, for messages."""
        return gradebook_url.shown(self.db_url)

    def check_gradebook(self, required: Iterable[str] = ()) -> None:
        """Refuse a gradebook of another course, or one without a ``required`` lesson."""
        known = {lesson.slug for lesson in load_manifest().lessons} | set(self.lessons())
        gradebook_url.check_gradebook(self.db_url, COURSE_ID, known, required)

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
