"""nbgrader's late-submission plugin, as the instructor's own nbgrader settings configure it."""

from __future__ import annotations

import re
import sys
from typing import Any

from core.cli import one_line

from .course import Course
from .errors import SetupError


def penalty(plugin: Any, student: str, score: float, seconds_late: float) -> float | None:
    """What the late policy takes from a submission this late, as nbgrader's
    ``AssignLatePenalties`` decides it: nothing (None) unless it is past the due date, else the
    plugin's penalty kept between 0 and the score. The one place a penalty is decided: the
    gradebook's grades and collect's warning on undated zips both ask here."""
    if seconds_late <= 0:
        return None
    taken = plugin.late_submission_penalty(student, score, seconds_late)
    return None if taken is None else min(max(float(taken), 0.0), score)


def after_penalty(score: float, taken: float | None) -> float:
    """A submission's points as grades.csv has them: its score less the late penalty."""
    return max(0.0, float(score) - float(taken or 0))


def late_penalty_plugin(course: Course) -> Any:
    """nbgrader's late-submission plugin, configured as nbgrader's own commands would be by the
    instructor's ``nbgrader_config.py`` (or ``.json``) in Jupyter's config directories
    (``jupyter --paths``): ``c.LateSubmissionPlugin.penalty_method = "zero"``, or
    ``c.AssignLatePenalties.plugin_class = "late.SubMarks"`` for a plugin of one's own in
    ``late.py`` in the course folder, as nbgrader's documentation places it. The course's own
    settings have none. Autograde asks it for each late submission's penalty."""
    from nbgrader.preprocessors import AssignLatePenalties

    from .own_config import instructor_config

    config = instructor_config()
    added = str(course.root) not in sys.path
    if added:
        sys.path.insert(0, str(course.root))
    try:
        late = AssignLatePenalties(config=config)
        late.init_plugin()
    except Exception as error:  # noqa: BLE001 - a plugin class that cannot be loaded or made
        raise SetupError(refusal(error, course)) from None
    finally:
        if added:
            sys.path.remove(str(course.root))
    return late.plugin_inst


# traitlets names the object whose setting is wrong by its repr (`<nbgrader....AssignLatePenalties
# object at 0x7f...>`): the class's name says the same to an instructor, without the address.
_REPR = re.compile(r"<(?:[\w.]+\.)?(\w+) object at 0x[0-9a-fA-F]+>")


def refusal(error: BaseException, course: Course) -> str:
    """Why the plugin cannot be made, in one line with the fix for the setting at fault."""
    why = _REPR.sub(r"an \1", one_line(error))
    if "penalty_method" in why:
        fix = "set c.LateSubmissionPlugin.penalty_method to 'none' or 'zero'"
    else:
        fix = (
            f"put the plugin's module in {course.root} or on PYTHONPATH, or fix "
            "c.AssignLatePenalties.plugin_class"
        )
    return f"the late-submission plugin cannot be loaded: {why} ({fix} in your nbgrader_config.py)"
