"""instructor/gradebook_url.py: a PostgreSQL gradebook (one server for the file, built once):
a cluster autograde matches one process, and release, autograde, report and export run on it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import pytest
from support.extras import require_extra

require_extra("nbgrader", "the grading extra (nbgrader) is not installed")
from support.autograde_fakes import submit  # noqa: E402
from support.instructor_commands import (  # noqa: E402
    LESSON,
    STUDENT_MISTAKE,
    instructor,
    instructor_here,
    released_points,
)
from support.system_packages import require  # noqa: E402


@pytest.fixture(scope="module")
def postgres():
    """A private PostgreSQL server (Debian's postgresql package) on a Unix socket in a fresh
    folder, for this module; yields a function making a new database's SQLAlchemy URL."""
    import tempfile

    binaries = require("postgresql")
    psycopg = pytest.importorskip("psycopg", reason="the grading extra (psycopg) is missing")
    folder = Path(tempfile.mkdtemp(prefix="course-pg-"))
    # initdb refuses to run as root: there, the server runs as Debian's postgres user.
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_user:
        shutil.chown(folder, "postgres")
    folder.chmod(0o700)
    with socket.socket() as s:  # a free number for the socket's name
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def run(*command: str) -> None:
        done = subprocess.run([*as_user, *command], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr

    data = folder / "data"
    run(str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
    options = f"-k {folder} -p {port} -c listen_addresses='' -c fsync=off"
    run(
        str(binaries / "pg_ctl"),
        "-D",
        str(data),
        "-o",
        options,
        "-l",
        str(folder / "log"),
        "-w",
        "start",
    )
    names = iter(range(1000))

    def new_database() -> str:
        name = f"course{next(names)}"
        with psycopg.connect(
            host=str(folder), port=port, user="postgres", dbname="postgres", autocommit=True
        ) as db:
            db.execute(f"CREATE DATABASE {name}")
        return f"postgresql+psycopg://postgres@/{name}?host={folder}&port={port}"

    try:
        yield new_database
    finally:
        run(str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(folder, ignore_errors=True)


def _kill_a_busy_worker(scheduler: str, killed: list, stop: threading.Event) -> None:
    """Wait until a worker is grading, let it get halfway, then SIGKILL its process."""
    import signal
    import time

    from distributed import Client

    with Client(scheduler, timeout=60) as client:
        while not stop.is_set():
            busy = [worker for worker, keys in client.processing().items() if keys]
            if busy:
                time.sleep(0.5)
                pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.05)


def _scores(db_url: str) -> dict[tuple[str, str, str], float]:
    """Every grade in the gradebook: (student, lesson, cell) -> score."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        return {
            (sub.student.id, sub.assignment.name, grade.name): grade.score
            for assignment in gb.assignments
            for sub in assignment.submissions
            for nb in sub.notebooks
            for grade in nb.grades
        }


def test_cluster_autograde_on_postgresql_matches_one_process(
    released_course, postgres, tmp_path_factory, monkeypatch
):
    """The same class graded twice: in one process into SQLite, and on a local cluster of two
    worker processes into PostgreSQL, one worker SIGKILLed mid-grading. Same grades, every
    submission recorded exactly once."""
    from distributed import LocalCluster
    from nbgrader.api import Gradebook
    from sqlalchemy import create_engine, text
    from support.autograde_fakes import fake_grade

    from instructor import autograde as pipeline
    from instructor.course import Course
    from instructor.gradebook import HISTORY
    from instructor.nbgrader_api import api

    checks = list(released_points(released_course))
    courses = {}
    for name, db in (("single", None), ("cluster", postgres())):
        root = tmp_path_factory.mktemp(name) / "course"
        shutil.copytree(released_course, root)
        course = courses[name] = Course.at(root, db)
        if db:  # the lesson's cells into the new gradebook, as the release would
            assert api(course).generate_assignment(LESSON, force=True, create=True)["success"]
        for i in range(6):
            fails = {checks[j]: None for j in range(i % len(checks))}
            submit(root, f"s{i}", fails, sleep=0.8)
    single = pipeline.autograde(
        courses["single"], [LESSON], engine="threads", workers=1, grader=fake_grade
    )
    killed: list[int] = []
    stop = threading.Event()
    # Worker processes, so that one can be killed: the external-cluster path (--scheduler).
    # Dask's HTTP servers on the loopback interface only, as docs/instructors.md asks of one.
    with LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address="127.0.0.1:0",
        worker_dashboard_address="127.0.0.1:0",
    ) as cluster:
        killer = threading.Thread(
            target=_kill_a_busy_worker, args=(cluster.scheduler_address, killed, stop)
        )
        killer.start()
        try:
            spread = pipeline.autograde(
                courses["cluster"],
                [LESSON],
                scheduler=cluster.scheduler_address,
                grader=fake_grade,
                progress=False,
            )
        finally:
            stop.set()
            killer.join()
    assert killed, "no worker was grading when the test looked"
    assert all(o.recorded for o in single + spread), [o.notes for o in single + spread]
    assert _scores(courses["cluster"].db_url) == _scores(courses["single"].db_url)
    assert len(_scores(courses["cluster"].db_url)) == 6 * len(checks)
    engine = create_engine(courses["cluster"].db_url)
    with engine.connect() as db:
        assert db.execute(text("SELECT count(*) FROM submitted_assignment")).scalar() == 6
        assert db.execute(text("SELECT count(*) FROM grade")).scalar() == 6 * len(checks)
        history = db.execute(text(f"SELECT count(*) FROM {HISTORY.name}")).scalar()
        assert history == 6 * len(checks)
    engine.dispose()
    with Gradebook(courses["cluster"].db_url) as gb:
        assert {s.student.id for s in gb.find_assignment(LESSON).submissions} == {
            f"s{i}" for i in range(6)
        }


def test_release_autograde_report_and_export_on_postgresql(postgres, tmp_path, monkeypatch, capfd):
    """The gradebook's URL is given once, to release: autograde, report and export then use
    it without being told, none of them prints its password, and a command pointed at a
    gradebook without the course's lessons says how to switch."""
    import csv

    from support.autograde_fakes import fake_grade

    from instructor import autograde as pipeline
    from instructor.course import Course
    from instructor.gradebook_url import GRADEBOOK_ENV

    monkeypatch.delenv(GRADEBOOK_ENV, raising=False)
    url = postgres().replace("//postgres@", "//postgres:s3cret@")  # trust auth: never checked
    course = tmp_path / "course"
    said = []
    done = instructor(
        course, "release", LESSON, "--gradebook", url, "--site-url", "https://c.example.org/"
    )
    said.append(done.stdout + done.stderr)
    assert done.returncode == 0, said[-1][-3000:]
    submit(course, "ann", {})
    submit(course, "bob", {"lookup-matches-indexing": STUDENT_MISTAKE})
    outcomes = pipeline.autograde(
        Course.at(course), [LESSON], engine="threads", grader=fake_grade, progress=False
    )
    assert [o.recorded for o in outcomes] == [True, True], [o.notes for o in outcomes]
    for command in ("report", "export"):
        status, out, err = instructor_here(capfd, course, command)
        said.append(out + err)
        assert status == 0, said[-1][-3000:]
    assert not (course / "gradebook.db").exists()  # nothing fell back to SQLite
    rows = [r for r in csv.DictReader((course / "grades.csv").open()) if r["assignment"] == LESSON]
    assert {r["student_id"]: r["status"] for r in rows} == {"ann": "graded", "bob": "graded"}
    report = (course / "reports" / "mistakes.csv").read_text()
    assert STUDENT_MISTAKE in report and "bob" in report
    status, out, err = instructor_here(
        capfd, course, "report", "--gradebook", f"sqlite:///{tmp_path / 'new.db'}"
    )
    said.append(out + err)
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and "release into it" in lines[0], lines
    assert not any("s3cret" in text for text in said)
