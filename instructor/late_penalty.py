"""nbgrader's late-submission plugin, as the instructor's own nbgrader settings configure it."""

from __future__ import annotations

import sys
from typing import Any

from core.cli import one_line

from .course import Course
from .errors import SetupError


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
        raise SetupError(
            f"the late-submission plugin cannot be loaded: {one_line(error)} (put its "
            f"module in {course.root} or on PYTHONPATH, or fix c.AssignLatePenalties."
            "plugin_class in your nbgrader_config.py)"
        ) from None
    finally:
        if added:
            sys.path.remove(str(course.root))
    return late.plugin_inst
