"""``similarity LESSON``: which submissions of a lesson look alike (instructors only).

Each student's newest submission of the lesson's module is compared with every other's by
copydetect (a maintained implementation of winnowing, the fingerprinting MOSS uses: code is
tokenised first, so renamed variables still match). The released stub is boilerplate: what
every student starts from never counts as shared. The HTML report (copydetect's, with a
notice on top) lists the most similar pairs and highlights the passages they share; it names
students, so it is for the course staff only. A high score is a reason to look, not proof:
short exercises have few ways to be written.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from core.atomic import atomic_write_bytes
from core.manifest import load_manifest

from .autograde import STUDENT_ID
from .course import PACKAGE, Course
from .errors import SetupError

DISPLAY_AT = 0.3  # pairs sharing at least this share of their code are shown
NOTICE = (
    "<p id='instructors-only' style='background:#fff3cd;border:1px solid #e0c060;"
    "padding:.6rem 1rem'><strong>For instructors only.</strong> Similar pairs of "
    "submissions of {lesson}, the released stub's code ignored. A high score is a reason to "
    "read both, not proof.</p>"
)


@dataclass(frozen=True)
class Pair:
    first: str
    second: str
    share: float  # of the first student's code found in the second's (the larger of both ways)


def compare(course: Course, lesson: str, to: Path | None = None) -> tuple[Path, list[Pair]]:
    """Write ``reports/similarity-LESSON.html``; returns it and the pairs, most similar first."""
    try:
        from copydetect import CopyDetector
    except ImportError:
        raise SetupError(
            "copydetect is not installed: install the grading extra (pip install -e '.[grading]')"
        ) from None
    module = f"{load_manifest().lesson(lesson).module}.py"
    stub = course.source / lesson / PACKAGE / module
    # Only ids autograde accepts: copydetect's page shows the file names unescaped.
    students = [
        s
        for s in course.students(lesson)
        if STUDENT_ID.match(s) and (course.submitted / s / lesson / PACKAGE / module).is_file()
    ]
    if len(students) < 2:
        raise SetupError(f"fewer than two submissions of {lesson}: nothing to compare")
    path = Path(to or course.root / "reports") / f"similarity-{lesson}.html"
    with tempfile.TemporaryDirectory(prefix="course-similarity-") as tmp:
        # One folder per student, so that the report names who wrote each file.
        for student in students:
            (Path(tmp) / student).mkdir()
            shutil.copyfile(
                course.submitted / student / lesson / PACKAGE / module, Path(tmp) / student / module
            )
        detector = CopyDetector(
            extensions=["py"],
            display_t=DISPLAY_AT,
            autoopen=False,
            silent=True,
            out_file=str(Path(tmp) / "report.html"),  # unused: the page is returned
        )
        for student in students:
            detector.add_file(str(Path(tmp) / student / module))
        if stub.is_file():
            detector.add_file(str(stub), type="boilerplate")
        detector.run()
        pairs = [
            Pair(Path(a).parent.name, Path(b).parent.name, max(share_a, share_b))
            for share_a, share_b, a, b, *_ in detector.get_copied_code_list()
        ]
        page = detector.generate_html_report(output_mode="return")
    at = page.find(">", page.find("<body")) + 1
    page = page[:at] + NOTICE.format(lesson=lesson) + page[at:]
    atomic_write_bytes(path, page.encode("utf-8"))
    return path, sorted(pairs, key=lambda p: (-p.share, p.first, p.second))
