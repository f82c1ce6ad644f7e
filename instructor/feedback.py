"""``feedback``: the students' feedback HTML, from nbgrader's ``generate_feedback`` on every
autograded submission, hidden tests stripped; each student's folder holds what is theirs (the
HTML and their lesson module) and what nbgrader's exchange needs to return it (the
submission's time and secret), nothing of the assignment's."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from core.manifest import load_manifest

from .course import PACKAGE, Course
from .errors import SetupError
from .nbgrader_api import api


def feedback(course: Course, lessons: list[str] | None = None) -> tuple[list[str], list[str]]:
    """nbgrader generate_feedback for every autograded submission, hidden tests stripped,
    each student's folder then holding what is theirs: the HTML and their lesson module.
    Returns the files made and the lessons skipped for want of autograded submissions.

    Refused, in one line, with a gradebook of another course, or one without the grades of
    autograded/. nbgrader writes into a staging folder; a student's feedback for a lesson is
    replaced only by a new one, so a failure leaves the feedback already there as it was."""
    lessons = lessons or course.lessons()
    course.check_gradebook(lessons)
    made, skipped = [], []
    staging = course.root / ".feedback-staging"
    nbgrader = None
    try:
        for lesson in lessons:
            students = sorted(p.parent.name for p in course.autograded.glob(f"*/{lesson}"))
            if not any(course.autograded.glob(f"*/{lesson}/{lesson}.ipynb")):
                skipped.append(lesson)
                continue
            _check_grades(course, lesson, students)
            shutil.rmtree(staging, ignore_errors=True)
            nbgrader = nbgrader or api(course, feedback_directory=staging.name)
            result = nbgrader.generate_feedback(lesson, force=True)
            if not result.get("success"):
                log = (result.get("error") or result.get("log") or "").strip().splitlines()
                raise SetupError(
                    f"nbgrader generate_feedback {lesson} failed "
                    f"({log[-1] if log else 'no log'}): the feedback already there is unchanged"
                )
            own = f"{PACKAGE}/{load_manifest().lesson(lesson).module}.py"
            for folder in sorted(staging.glob(f"*/{lesson}")):
                keep_only_theirs(folder, own)
                graded = course.autograded / folder.parent.name / lesson / own
                if graded.is_file() and not graded.is_symlink() and not (folder / own).exists():
                    (folder / own).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(graded, folder / own)
                dest = course.feedback / folder.parent.name / lesson
                dest.parent.mkdir(parents=True, exist_ok=True)
                if dest.exists():
                    shutil.rmtree(dest)
                os.replace(folder, dest)
            made += [str(p) for p in sorted(course.feedback.glob(f"*/{lesson}/*.html"))]
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return made, skipped


def _check_grades(course: Course, lesson: str, students: list[str]) -> None:
    """Refuse a gradebook that holds none of the submissions of ``autograded/*/LESSON``
    (another semester's, say): their feedback would be made from grades that are not theirs."""
    from nbgrader.api import Gradebook

    with Gradebook(course.db_url) as gb:
        known = {s.student.id for s in gb.find_assignment(lesson).submissions}
    missing = [student for student in students if student not in known]
    if missing and len(missing) == len(students):
        raise SetupError(
            f"the gradebook {course.gradebook_name()} has no grade for {missing[0]}/{lesson}, "
            "which autograded/ holds: it is not this course's gradebook; point --gradebook "
            "(or $COURSE_GRADEBOOK_URL) at the one autograde recorded into (nothing was changed)"
        )


# What nbgrader's release_feedback reads beside the HTML to file it under the submission it is
# for: the submission's time and the secret nbgrader's submit drew for it, which names the
# feedback in the exchange (the student's fetch_feedback finds it with their copy of the secret).
EXCHANGE_FILES = ("timestamp.txt", "submission_secret.txt")


def keep_only_theirs(folder: Path, own: str) -> None:
    """Take out of a feedback folder what nbgrader copied from the assignment (the released
    package, the graders): the student gets the HTML and their own lesson module back, and
    the submission's time and secret stay beside them for ``nbgrader release_feedback``."""
    for path in sorted(folder.rglob("*"), reverse=True):  # files before their folders
        rel = path.relative_to(folder).as_posix()
        if path.is_dir() and not path.is_symlink():
            if not any(path.iterdir()):
                path.rmdir()
        elif not (
            rel == own
            or ("/" not in rel and rel.endswith(".html"))
            or (rel in EXCHANGE_FILES and not path.is_symlink())
        ):
            path.unlink()
