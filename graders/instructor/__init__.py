"""Instructor tooling: nbgrader release, sandboxed parallel autograde, feedback and export.

    python -m graders.instructor release [LESSON ...]     # source/ and release/ (nbgrader)
    python -m graders.instructor collect [LESSON ...]     # zips -> submitted/ (zip_collect)
    python -m graders.instructor autograde [LESSON ...] [--workers N] [--student ID ...]
    python -m graders.instructor feedback [LESSON ...]    # feedback/ HTML, hidden tests stripped
    python -m graders.instructor export                   # grades.csv, grades-by-check.csv

(``nox -s release``, ``nox -s autograde``, ``nox -s feedback``, ``nox -s export``.) The course
directory is build/nbgrader/ unless ``--course DIR`` says otherwise; it is a standard nbgrader
course directory, so nbgrader's own commands and formgrader work there too.

Modules: ``course`` (layout and nbgrader configuration), ``release`` (notebooks from the
manifest), ``notebook`` (the ``check()`` the notebook cells call; ships to students),
``preprocessors`` (notebook rebuilt from the gradebook; hidden tests out of feedback),
``autograde`` (parallel grading, single-writer recording, feedback, export, zip collect),
``collect`` and ``export`` (nbgrader plugins). The sandbox is graders/sandbox.py.
"""
