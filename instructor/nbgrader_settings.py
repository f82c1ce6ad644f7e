"""Every nbgrader option of this course, set on a traitlets config.

Used both by our commands (through :mod:`.nbgrader_api`) and by the generated
``nbgrader_config.py`` that lets plain ``nbgrader ...`` commands run in the course folder.
Setting options changes nothing else: the kernels' environment is passed to each kernel
(:class:`.kernel.CourseExecute`), not put into this process's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.manifest import Manifest, load_manifest

from .course import COURSE_ID, PACKAGE, Course

CELL_TIMEOUT = 1800  # seconds; a cell may grade a whole lesson (plain nbgrader autograde)


def configure(c: Any, root: Course | Path | str, manifest: Manifest | None = None) -> Any:
    """Set every nbgrader option of this course on the traitlets config ``c``."""
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import (
        CheckCellMetadata,
        ClearOutput,
        DeduplicateIds,
        Execute,
        GetGrades,
        OverwriteCells,
        OverwriteKernelspec,
    )

    from .collect import SubmissionCollector
    from .export import GradesExport
    from .kernel import CourseExecute
    from .preprocessors import HideHiddenTests, KeepGradeOnFailure, RebuildFromGradebook

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
    # nbgrader's own steps, with the Execute step that gives kernels their environment,
    # followed by the step that keeps a grade when the grading failed by its own doing.
    steps = Autograde.class_traits()["autograde_preprocessors"].default()
    c.Autograde.autograde_preprocessors = [
        new for s in steps for new in ([CourseExecute, KeepGradeOnFailure] if s is Execute else [s])
    ]
    c.Execute.timeout = CELL_TIMEOUT
    c.Execute.extra_arguments = [
        "--HistoryManager.hist_file=:memory:",
        "--InteractiveShellApp.ignore_cwd=True",
        "--IPKernelApp.log_level=ERROR",
    ]
    c.GenerateFeedback.preprocessors = [GetGrades, HideHiddenTests, CSSHTMLHeaderPreprocessor]
    c.ZipCollectApp.collector_plugin = SubmissionCollector
    c.ExportApp.plugin_class = GradesExport
    c.FileNameCollectorPlugin.valid_ext = [".ipynb", ".py"]
    c.ExtractorPlugin.zip_ext = [".zip"]
    return c


def nbgrader_config(course: Course | Path | str) -> Any:
    from traitlets.config import Config

    return configure(Config(), course)
