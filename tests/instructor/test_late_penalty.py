"""instructor/late_penalty.py: nbgrader's late-submission plugin, as autograde applies it."""

from __future__ import annotations

import shutil
import sys

import pytest
from support.extras import require_extra

require_extra("nbgrader", "the grading extra (nbgrader) is not installed")
from support.autograde_fakes import submit  # noqa: E402
from support.instructor_commands import (  # noqa: E402
    LESSON,
)


def test_autograde_applies_nbgrader_late_penalty(released_course, tmp_path, monkeypatch):
    """A submission past the lesson's due date gets the penalty of nbgrader's late-submission
    plugin, configured where nbgrader's own commands read it; without that setting nbgrader's
    default (no penalty) holds, and a regrade on time clears an earlier penalty."""
    import csv

    from nbgrader.api import Gradebook
    from support.autograde_fakes import fake_grade

    from instructor import autograde as pipeline
    from instructor.course import Course
    from instructor.export import export

    root = tmp_path / "course"
    shutil.copytree(released_course, root)
    course = Course.at(root)
    config = tmp_path / "jupyter"
    config.mkdir()
    (config / "nbgrader_config.py").write_text('c.LateSubmissionPlugin.penalty_method = "zero"\n')
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(config))
    with Gradebook(course.db_url) as gb:
        gb.update_or_create_assignment(LESSON, duedate="2026-02-01 12:00:00 UTC")
    stamps = {"early": "2026-02-01 11:59:00", "late": "2026-02-01 12:30:00"}
    for student, stamp in stamps.items():
        dest = submit(root, student, {"nearest-cosine": None})
        (dest / "timestamp.txt").write_text(f"{stamp}.000000 UTC\n")

    def grade(*students: str) -> dict:
        done = pipeline.autograde(
            course, [LESSON], list(students), engine="threads", grader=fake_grade
        )
        return {o.student: o for o in done}

    outcomes = grade("early", "late")
    assert 0 < outcomes["early"].points < outcomes["early"].max_points
    assert outcomes["late"].points == 0 and outcomes["late"].recorded
    assert outcomes["late"].raw == outcomes["early"].points == outcomes["early"].raw
    with Gradebook(course.db_url) as gb:
        early, late = gb.find_submission(LESSON, "early"), gb.find_submission(LESSON, "late")
        assert early.total_seconds_late == 0 and not early.late_submission_penalty
        assert late.total_seconds_late == 1800
        assert late.late_submission_penalty == late.score == outcomes["early"].points
    export(course)
    with open(root / "grades.csv", newline="") as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f) if row["assignment"] == LESSON}
    assert float(rows["late"]["score"]) == 0
    assert float(rows["late"]["late_submission_penalty"]) == outcomes["early"].points
    assert float(rows["early"]["score"]) == outcomes["early"].points

    # nbgrader's default method is no penalty; the late student's earlier one goes.
    (config / "nbgrader_config.py").unlink()
    assert grade("late")["late"].points == outcomes["early"].points
    with Gradebook(course.db_url) as gb:
        assert not gb.find_submission(LESSON, "late").late_submission_penalty

    # A plugin of one's own, in late.py in the course folder as nbgrader's documentation has it.
    (root / "late.py").write_text(
        "from nbgrader.plugins import LateSubmissionPlugin\n\n\n"
        "class OnePointAnHour(LateSubmissionPlugin):\n"
        "    def late_submission_penalty(self, student_id, score, total_seconds_late):\n"
        "        return -(-total_seconds_late // 3600)\n"
    )
    (config / "nbgrader_config.py").write_text(
        'c.AssignLatePenalties.plugin_class = "late.OnePointAnHour"\n'
    )
    assert grade("late")["late"].points == outcomes["early"].points - 1
    with Gradebook(course.db_url) as gb:
        assert gb.find_submission(LESSON, "late").late_submission_penalty == 1

    # Mistakes in that setting: one line naming the problem, before anything is graded.
    from instructor.errors import SetupError

    (config / "nbgrader_config.py").write_text(
        'c.AssignLatePenalties.plugin_class = "no_such_module.Plugin"\n'
    )
    with pytest.raises(SetupError, match=r"late-submission plugin cannot be loaded.*no_such"):
        grade("late")
    (config / "nbgrader_config.py").write_text("c.LateSubmissionPlugin.penalty_method = \n")
    with pytest.raises(SetupError, match=r"nbgrader_config\.py: SyntaxError.*fix or remove"):
        grade("late")


@pytest.mark.parametrize(
    ("setting", "said", "fix"),
    [
        ('plugin_class = "nowhere.Missing"', "'nowhere.Missing' could not be", "plugin_class"),
        ('plugin_class = "not_a_plugin.NotAPlugin"', "subclass of", "plugin_class"),
        ("plugin_class = 3", "not the int 3", "plugin_class"),
    ],
)
def test_a_plugin_that_cannot_be_made_is_one_line_without_an_object_repr(
    tmp_path, monkeypatch, setting, said, fix
):
    from instructor.course import Course
    from instructor.errors import SetupError
    from instructor.late_penalty import late_penalty_plugin

    # a module name of its own: the test above imported a late.py already
    (tmp_path / "not_a_plugin.py").write_text("class NotAPlugin:\n    pass\n")
    monkeypatch.delitem(sys.modules, "not_a_plugin", raising=False)
    config = tmp_path / "jupyter"
    config.mkdir()
    (config / "nbgrader_config.py").write_text(f"c.AssignLatePenalties.{setting}\n")
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(config))
    with pytest.raises(SetupError) as raised:
        late_penalty_plugin(Course.at(tmp_path))
    message = str(raised.value)
    assert said in message and f"fix c.AssignLatePenalties.{fix}" in message, message
    assert " object at 0x" not in message and "<" not in message and "\n" not in message


def test_an_unknown_penalty_method_names_the_methods_there_are(tmp_path, monkeypatch):
    from instructor.course import Course
    from instructor.errors import SetupError
    from instructor.late_penalty import late_penalty_plugin

    config = tmp_path / "jupyter"
    config.mkdir()
    (config / "nbgrader_config.py").write_text('c.LateSubmissionPlugin.penalty_method = "half"\n')
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(config))
    with pytest.raises(SetupError, match=r"'half'.*penalty_method to 'none' or 'zero'"):
        late_penalty_plugin(Course.at(tmp_path))


def test_a_penalty_is_decided_in_one_place_as_nbgrader_decides_it():
    """Nothing before the due date; after it the plugin's penalty, kept between 0 and the
    score; the points after it never below 0."""
    from instructor.late_penalty import after_penalty, penalty

    class Asks:
        def __init__(self, answer):
            self.answer, self.asked = answer, []

        def late_submission_penalty(self, student, score, seconds_late):
            self.asked.append((student, score, seconds_late))
            return self.answer

    on_time = Asks(5)
    assert penalty(on_time, "ann", 10.0, 0) is None and not on_time.asked
    assert penalty(Asks(3), "ann", 10.0, 60) == 3
    assert penalty(Asks(30), "ann", 10.0, 60) == 10  # never more than the score
    assert penalty(Asks(-2), "ann", 10.0, 60) == 0
    assert penalty(Asks(None), "ann", 10.0, 60) is None  # the plugin gives none
    assert after_penalty(10.0, 3) == 7 and after_penalty(2.0, 5) == 0
    assert after_penalty(4, None) == 4
