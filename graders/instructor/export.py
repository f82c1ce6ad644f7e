"""``export``: grades as CSV, one row per student and lesson (nbgrader's own exporter) and one
row per student and check (:class:`ChecksCsvExportPlugin`, from the gradebook's grade cells:
a hidden check appears under its opaque cell id, ``cNNN-hidden``)."""

from __future__ import annotations

import csv

from nbgrader.api import Gradebook
from nbgrader.plugins import ExportPlugin


class ChecksCsvExportPlugin(ExportPlugin):
    """Per-check partial credit: student, lesson, cell, check, score, max score."""

    def export(self, gradebook: Gradebook) -> None:
        path = self.to or "grades-by-check.csv"
        with open(path, "w", newline="", encoding="utf-8") as f:
            out = csv.writer(f)
            out.writerow(["student_id", "lesson", "cell", "check", "score", "max_score"])
            for assignment in sorted(gradebook.assignments, key=lambda a: a.name):
                for submission in sorted(assignment.submissions, key=lambda s: s.student.id):
                    for notebook in submission.notebooks:
                        for grade in sorted(notebook.grades, key=lambda g: g.name):
                            check = grade.name.split("-", 1)[1] if "-" in grade.name else ""
                            out.writerow(
                                [
                                    submission.student.id,
                                    assignment.name,
                                    grade.name,
                                    check,
                                    grade.score,
                                    grade.max_score,
                                ]
                            )
