"""Instructor tooling: nbgrader release, parallel autograde, feedback, export, class report.

    python -m instructor release [LESSON ...] [--site-url URL]
    python -m instructor collect [LESSON ...]     # zips -> submitted/
    python -m instructor autograde [LESSON ...] [--workers N] [--student ID ...]
                                           [--scheduler tcp://HOST:8786] [--report]
    python -m instructor feedback [LESSON ...]    # feedback/ HTML, hidden tests stripped
    python -m instructor export                   # grades.csv, grades-by-check.csv
    python -m instructor report                   # reports/mistakes.html and .csv

(``nox -s release``, ``nox -s autograde``, ...). The course directory is build/nbgrader/ unless
``--course DIR`` says otherwise, and the gradebook its gradebook.db unless ``--gradebook URL``
(or $COURSE_GRADEBOOK_URL) names another database; it is a standard nbgrader course
directory, so nbgrader's own commands and formgrader work there too.

Modules: ``course`` (layout, gradebook URL, nbgrader configuration), ``release`` (notebooks
from the manifest), ``notebook`` (the ``check()`` the notebook cells call; ships to students),
``preprocessors`` (notebook rebuilt from the gradebook; hidden tests out of feedback),
``collect`` (zips into submitted/), ``autograde`` (grading on a Dask cluster, feedback),
``gradebook`` (batched recording and the per-check history), ``export`` (the CSV files) and
``mistakes`` (the class report). The sandbox is graders/sandbox.py.
"""
