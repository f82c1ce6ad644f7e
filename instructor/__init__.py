"""Instructor tooling: nbgrader release, parallel autograde, feedback, export, class report.

    python -m instructor release [LESSON ...] [--site-url URL]
    python -m instructor collect [LESSON ...]     # zips -> submitted/
    python -m instructor autograde [LESSON ...] [--workers N] [--student ID ...]
                                           [--scheduler tcp://HOST:8786] [--report]
    python -m instructor feedback [LESSON ...]    # feedback/ HTML, hidden tests stripped
    python -m instructor export                   # grades.csv, grades-by-check.csv
    python -m instructor report                   # reports/mistakes.html and .csv
    python -m instructor gradescope LESSON ...    # gradescope/LESSON.zip, an autograder
    python -m instructor similarity LESSON ...    # reports/similarity-LESSON.html

(``nox -s release``, ``nox -s autograde``, ...). The course directory is build/nbgrader/ unless
``--course DIR`` says otherwise, a standard nbgrader course directory, so nbgrader's own
commands and formgrader work there too. The gradebook is its gradebook.db unless
``--gradebook URL`` (or $COURSE_GRADEBOOK_URL) names another database; release remembers it,
so later commands need not be told again.

Modules: ``course`` (the course folder's layout), ``gradebook_url`` (which gradebook),
``nbgrader_settings`` (nbgrader's options), ``own_config`` (the instructor's own nbgrader
settings), ``late_penalty`` (its late-submission plugin),
``kernel`` (the grading kernels' environment),
``nbgrader_api`` (nbgrader's API, the generated config file), ``errors``, ``release``
(notebooks from the manifest), ``preprocessors`` (notebook rebuilt from the gradebook; hidden
tests out of feedback), ``collect`` (zips into submitted/), ``grading`` (one grading run, on a
worker), ``autograde`` (grading on a Dask cluster), ``feedback`` (the students' feedback HTML),
``gradebook`` (batched recording and the per-check history), ``export`` (the CSV files, an
nbgrader export plugin), ``class_report`` (the class report), ``gradescope`` and
``gradescope_run`` (the Gradescope autograder) and ``similarity`` (similar submissions).
The sandbox is graders/sandbox.py.
"""
