"""instructor/autograde.py (and its command): a failed grading replaces no grade, only new or
changed submissions are graded, one autograde at a time from before collect, a cluster with no
worker ends in one line, an interrupted run leaves nothing behind, and feedback never touches
another course's gradebook. The grading itself is the stand-in harness
(tests/support/autograde_fakes.py); nbgrader's own ``autograde`` command grades for real in
the last test."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from support import forkserver
from support.extras import require_extra

require_extra("nbgrader", "the grading extra (nbgrader) is not installed")
from support.autograde_fakes import submit  # noqa: E402
from support.instructor_commands import manifest  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LESSON = "embeddings"
LOOKUP = "lookup-matches-indexing"


def _score(course, student: str) -> float:
    from nbgrader.api import Gradebook

    with Gradebook(course.db_url) as gb:
        return gb.find_submission(LESSON, student).score


def _grade(course, students=None, grader=None):
    from support.autograde_fakes import fake_grade

    from instructor import autograde as pipeline

    outcomes = pipeline.autograde(
        course, [LESSON], students, engine="threads", grader=grader or fake_grade, progress=False
    )
    return {o.student: o for o in outcomes}


def test_a_grading_that_graded_nothing_keeps_the_grade_and_says_why(course):
    from support.autograde_fakes import submit

    from instructor import gradings

    submit(course.root, "ann", {LOOKUP: "off-by-one"})
    assert _grade(course)["ann"].recorded
    before = _score(course, "ann")
    assert before > 0
    entry = gradings.entry(course.root, "ann", LESSON)
    module = course.submitted / "ann" / LESSON / "exercises" / "embeddings.py"
    module.write_text(module.read_text() + "# BROKEN\n")
    ann = _grade(course)["ann"]
    assert not ann.recorded and not ann.graded
    assert any("exited with status 1" in note and "stands" in note for note in ann.notes)
    assert _score(course, "ann") == before
    after = gradings.entry(course.root, "ann", LESSON)
    assert after["failed"]["cause"] == "the grading run exited with status 1"
    assert after["seed"] == entry["seed"]  # the seed of the grade that stands
    assert stat.S_IMODE(gradings.path(course.root).stat().st_mode) == 0o600


def test_only_new_changed_or_failed_submissions_are_graded_again(course):
    from support.autograde_fakes import submit

    from instructor import autograde as pipeline

    for student in ("ann", "bob", "cy"):
        submit(course.root, student, {})
    jobs, _ = pipeline.find_jobs(course, [LESSON])
    assert pipeline.changed_jobs(course, jobs) == (jobs, [])
    _grade(course)
    assert pipeline.changed_jobs(course, jobs) == ([], jobs)
    submit(course.root, "bob", {LOOKUP: None})  # changed files
    (course.submitted / "cy" / LESSON / "timestamp.txt").write_text(
        "2026-01-29 09:00:00.000000 UTC\n"  # the same files, handed in at another time
    )
    todo, current = pipeline.changed_jobs(course, jobs)
    assert todo == [("bob", LESSON), ("cy", LESSON)] and current == [("ann", LESSON)]


def test_a_changed_hidden_check_grades_every_submission_again(course, tmp_path, monkeypatch):
    """The recorded result stands only for the graders that gave it: a fixed hidden check
    regrades without --all, in autograde and in a plain nbgrader autograde's cells."""
    from support.autograde_fakes import submit

    from core.fingerprint import graders_digest
    from graders import notebook
    from instructor import autograde as pipeline

    tree = tmp_path / "tree"  # the graders as this tree has them, to change one check
    shutil.copytree(
        ROOT / "graders", tree / "graders", ignore=shutil.ignore_patterns("__pycache__")
    )
    (tree / "course").mkdir()
    shutil.copyfile(ROOT / "course" / "lessons.toml", tree / "course" / "lessons.toml")
    for where in (pipeline, notebook):
        monkeypatch.setattr(where, "graders_digest", lambda: graders_digest(tree))
    for student in ("ann", "bob"):
        submit(course.root, student, {})
    jobs, _ = pipeline.find_jobs(course, [LESSON])
    _grade(course)
    assert pipeline.changed_jobs(course, jobs) == ([], jobs)
    result = course.results / "ann" / f"{LESSON}.json"
    expected = json.loads(result.read_text())["fingerprint"]
    assert notebook._read_result(result, expected) is not None  # nbgrader's cells reuse it
    hidden = tree / "graders" / "hidden" / f"test_{LESSON}.py"
    hidden.write_text(hidden.read_text() + "\n# a hidden check fixed\n")
    assert pipeline.changed_jobs(course, jobs) == (jobs, [])
    assert notebook._read_result(result, expected) is None  # stale: the cell grades again
    _grade(course)
    assert pipeline.changed_jobs(course, jobs) == ([], jobs)
    assert notebook._read_result(result, expected) is not None


HOLD_LOCK = """
import sys, time
from filelock import FileLock
with FileLock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_second_autograde_is_refused_before_it_collects(course, capfd):
    from instructor.__main__ import main

    archive = course.downloaded / LESSON / "archive"
    archive.mkdir(parents=True)
    (archive / "ann_embeddings.zip").write_bytes(b"")
    held = subprocess.Popen(  # the first autograde, in a process of its own, holds the lock
        [sys.executable, "-c", HOLD_LOCK, str(course.root / ".autograde.lock")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert held.stdout is not None and held.stdout.readline().strip() == "held"
        (course.root / ".autograde.holder").write_text("pid 4242, since 09:00:00\n")
        status = main(["--course", str(course.root), "autograde", "--engine", "threads"])
    finally:
        held.kill()
        held.wait()
    out, err = capfd.readouterr()
    assert status == 2 and not out
    assert err.count("\n") == 1 and "another autograde (pid 4242" in err, err
    assert not course.submitted.exists()  # nothing collected


def test_an_interrupted_autograde_removes_its_scratch_and_lock(course):
    """Ctrl-C (SIGINT while a grading runs) ends the run; the submission it wrote to disk is
    gone and the next autograde may start."""
    import signal

    from support.autograde_fakes import fake_grade, submit

    from instructor.autograde import course_lock

    submit(course.root, "ann", {})
    seen: list[Path] = []

    def interrupted(lesson, files, **kwargs):
        folder = Path(kwargs["scratch"]) / "ann"
        folder.mkdir()
        (folder / "embeddings.py").write_bytes(files["embeddings.py"])
        seen.append(folder)
        os.kill(os.getpid(), signal.SIGINT)
        return fake_grade(lesson, files, **kwargs)

    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            _grade(course, grader=interrupted)
    finally:
        signal.signal(signal.SIGINT, handler)
    assert seen and not seen[0].parent.exists()
    with course_lock(course):
        pass


def test_a_killed_autograde_stops_as_ctrl_c_does(course):
    """SIGTERM (kill's default) stops autograde as Ctrl-C does: its scratch folder, which
    holds the student's code, is removed and the lock let go (Python's own SIGTERM skips
    both)."""
    import signal

    from support.autograde_fakes import fake_grade, submit

    from instructor.__main__ import stopped_by_sigterm
    from instructor.autograde import course_lock

    submit(course.root, "ann", {})
    seen: list[Path] = []

    def killed(lesson, files, **kwargs):
        seen.append(Path(kwargs["scratch"]))
        os.kill(os.getpid(), signal.SIGTERM)
        return fake_grade(lesson, files, **kwargs)

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), stopped_by_sigterm():
        _grade(course, grader=killed)
    assert signal.getsignal(signal.SIGTERM) is before
    assert seen and not seen[0].exists()
    with course_lock(course):
        pass


def test_ctrl_c_is_one_line(course, capfd, monkeypatch):
    from instructor import __main__ as cli

    def interrupt(args, course):
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.COMMANDS, "autograde", interrupt)
    status = cli.main(["--course", str(course.root), "autograde"])
    out, err = capfd.readouterr()
    assert status == cli.INTERRUPTED and not out
    assert err.count("\n") == 1 and err.startswith("interrupted: autograde stopped"), err


def test_a_tls_scheduler_without_credentials_is_one_line(monkeypatch):
    pytest.importorskip("distributed")
    import dask

    from instructor.autograde import Engine
    from instructor.errors import SetupError

    with dask.config.set({"distributed.comm.tls.ca-file": None}):
        with pytest.raises(SetupError) as refused:
            Engine("dask", scheduler="tls://127.0.0.1:8786").__enter__()
    said = str(refused.value)
    assert "\n" not in said and "DASK_DISTRIBUTED__COMM__TLS__CA_FILE" in said, said


def test_a_cluster_without_workers_says_so_then_gives_up(course):
    pytest.importorskip("distributed")
    from distributed import LocalCluster
    from support.autograde_fakes import fake_grade, submit

    from instructor import autograde as pipeline
    from instructor.errors import SetupError

    submit(course.root, "ann", {})
    said: list[str] = []
    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as empty:
        with pipeline.Engine("dask", scheduler=empty.scheduler_address, wait=1) as pool:
            pool.say = said.append
            files, digest = pipeline.submission_files(course, "ann", LESSON)
            tasks = {("ann", LESSON, digest[:16]): (fake_grade, (LESSON, files), {})}
            with pytest.raises(SetupError) as gave_up:
                list(pool.run(tasks))
    assert said and said[0].startswith(f"waiting for a Dask worker on {empty.scheduler_address}")
    assert str(gave_up.value).startswith(f"no Dask worker joined {empty.scheduler_address} in 1 s")


def test_the_rerun_command_keeps_where_and_how_it_graded():
    from instructor.__main__ import parse, rerun_line, rerun_options
    from instructor.autograde import Outcome

    args = parse(["autograde", "--scheduler", "tls://sched:8786", "--course", "my course"])
    outcome = Outcome("ann", LESSON, notes=["grading failed: the worker died"])
    line = rerun_line(outcome, rerun_options(args))
    assert line.endswith(
        f"(re-run: nox -s autograde -- {LESSON} --student ann --course 'my course' "
        "--scheduler tls://sched:8786)"
    ), line


def test_a_postgres_url_is_taken_as_postgresql(tmp_path):
    from instructor.course import Course

    url = Course.at(tmp_path, "postgres://grader@db.example/course").db_url
    assert url == "postgresql://grader@db.example/course"
    assert Course.at(tmp_path, "postgres+psycopg://h/c").db_url == "postgresql+psycopg://h/c"


def test_feedback_refuses_another_gradebook_and_keeps_the_feedback_there(
    course, released_course, tmp_path, capfd
):
    """Pointed at another semester's gradebook (this course's lessons, other students),
    feedback says so in one line, and every feedback file already made stays."""
    from support.autograde_fakes import submit

    from instructor.__main__ import main

    for student in ("ann", "bob"):
        submit(course.root, student, {})
    _grade(course)
    assert main(["--course", str(course.root), "feedback", LESSON]) == 0
    before = {p: p.read_bytes() for p in course.feedback.rglob("*") if p.is_file()}
    assert len([p for p in before if p.suffix == ".html"]) == 2
    shutil.copyfile(released_course / "gradebook.db", tmp_path / "other.db")  # none graded
    other = f"sqlite:///{tmp_path / 'other.db'}"
    capfd.readouterr()
    status = main(["--course", str(course.root), "feedback", LESSON, "--gradebook", other])
    out, err = capfd.readouterr()
    assert status == 2 and err.count("\n") == 1 and "has no grade for ann/embeddings" in err, err
    assert {p: p.read_bytes() for p in course.feedback.rglob("*") if p.is_file()} == before


@pytest.mark.slow  # whole autogrades: above the CPU guard's bound
def test_plain_nbgrader_autograde_grades_and_a_failure_keeps_the_grade(course):
    """``nbgrader autograde LESSON`` in the course folder (formgrader's button runs the same):
    the kernel finds the graders, the reference solution earns every point, the seed is kept;
    when the grading then fails (its report cannot be written), nbgrader stops before saving
    and the grade stays, the failure recorded with its cause."""
    from instructor import gradings

    dest = course.submitted / "ann" / LESSON
    shutil.copytree(course.release / LESSON, dest)
    shutil.copyfile(ROOT / "solutions" / "embeddings.py", dest / "exercises" / "embeddings.py")
    scripts = os.path.dirname(sys.executable)
    env = {**os.environ, "PATH": os.pathsep.join([scripts, os.environ.get("PATH", "")])}
    command = [os.path.join(scripts, "nbgrader"), "autograde", LESSON, "--force"]
    done = subprocess.run(
        command, cwd=course.root, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    from nbgrader.api import Gradebook

    with Gradebook(course.db_url) as gb:
        submission = gb.find_submission(LESSON, "ann")
        assert submission.score == submission.max_score > 0
        full = submission.score
    result = json.loads((course.results / "ann" / f"{LESSON}.json").read_text())
    assert result["error"] is None and result["report"]["points"] == result["report"]["max_points"]
    assert gradings.entry(course.root, "ann", LESSON)["seed"] > 0
    blocked = course.root / "not-a-folder"
    blocked.write_text("")
    env["COURSE_AUTOGRADE_RESULTS"] = str(blocked / "results")
    (course.results / "ann" / f"{LESSON}.json").unlink()
    done = subprocess.run(
        command, cwd=course.root, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode != 0
    assert "its grade was not replaced" in done.stdout + done.stderr
    assert _score(course, "ann") == full
    assert "cause" in gradings.entry(course.root, "ann", LESSON)["failed"]


@pytest.mark.parametrize("engine", ["dask", "threads"])
def test_autograde_fails_soft_when_a_grading_task_raises(released_course, tmp_path, engine):
    """A grading task that raises (not a failed check: the task itself) costs only its own
    submission, on every engine: it is listed with its re-run command, the others are
    recorded (Dask hands a failed task's result back as an error tuple, not an exception)."""
    from support.autograde_fakes import fake_grade

    from instructor import autograde as pipeline
    from instructor.__main__ import rerun_line
    from instructor.course import Course

    root = tmp_path / "course"
    shutil.copytree(released_course, root)
    course = Course.at(root)
    submit(root, "ann", {})
    broken = submit(root, "bob", {})
    module = broken / "exercises" / f"{manifest().lesson(LESSON).module}.py"
    module.write_text(module.read_text() + "# RAISE\n")
    environment = dict(os.environ)
    outcomes = {
        o.student: o
        for o in pipeline.autograde(
            course, [LESSON], engine=engine, workers=2, grader=fake_grade, progress=False
        )
    }
    # Nothing of Dask's is left in this process's environment (nannies once wrote theirs).
    assert dict(os.environ) == environment
    assert outcomes["ann"].recorded and outcomes["ann"].graded, outcomes["ann"].notes
    bob = outcomes["bob"]
    assert not bob.recorded and not bob.graded
    line = rerun_line(bob)
    assert "GradingTaskError" in line and "broke down" in line, line
    assert line.endswith(f"(re-run: nox -s autograde -- {LESSON} --student bob)")
    from nbgrader.api import Gradebook

    with Gradebook(course.db_url) as gb:
        assert {s.student.id for s in gb.find_assignment(LESSON).submissions} == {"ann"}


def test_a_failed_grading_shows_no_score_in_the_progress_lines(capsys):
    """A grading that failed (a worker killed) says so, never "0 of 0"."""
    from instructor.autograde import Outcome, _Progress

    with _Progress(2) as bar:
        bar.recorded(Outcome("ann", LESSON, notes=["the grading run exited with status -9"]))
        bar.recorded(Outcome("bob", LESSON, recorded=True, points=3, max_points=20, raw=3))
    err = capsys.readouterr().err
    assert f"ann/{LESSON}: not graded  (the grading run exited with status -9)" in err
    assert f"bob/{LESSON}: 3 of 20\n" in err and "0 of 0" not in err


def test_a_late_penalty_shows_in_the_progress_lines_beside_the_raw_points(capsys):
    """The points as grades.csv has them, then the raw points and what the penalty took."""
    from instructor.autograde import Outcome, _Progress

    with _Progress(2) as bar:
        bar.recorded(Outcome("ann", LESSON, recorded=True, points=0, max_points=20, raw=12.5))
        bar.recorded(Outcome("cy", LESSON, recorded=True, points=15, max_points=20, raw=17))
    err = capsys.readouterr().err
    assert f"ann/{LESSON}: 0 of 20 (raw 12.5, late -12.5)\n" in err
    assert f"cy/{LESSON}: 15 of 20 (raw 17, late -2)\n" in err


@pytest.mark.slow  # whole autogrades: above the CPU guard's bound
def test_the_block_lesson_alone_gets_every_point_from_both_autogrades(course):
    """The reference block.py submitted alone (the folder's lessons 2 and 4 as released: stubs)
    gets every point, hidden checks included, from ``python -m instructor autograde`` (ann) and
    from nbgrader's own ``nbgrader autograde`` (bob), which grade it on its own code: the checker
    answers lesson 4's attention and lesson 2's lookup (they once scored 27 of 44)."""
    from nbgrader.api import Gradebook

    lesson = manifest().lesson("block")

    def hand_in(student: str) -> None:
        dest = course.submitted / student / "block"
        shutil.copytree(course.release / "block", dest)
        shutil.copyfile(ROOT / "solutions" / "block.py", dest / "exercises" / "block.py")

    hand_in("ann")
    done = forkserver.run(
        ["-m", "instructor", "--course", str(course.root), "autograde", "block"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    hand_in("bob")  # after: nbgrader's kernel grades bob itself (no result is waiting)
    scripts = os.path.dirname(sys.executable)
    env = {**os.environ, "PATH": os.pathsep.join([scripts, os.environ.get("PATH", "")])}
    done = subprocess.run(
        [os.path.join(scripts, "nbgrader"), "autograde", "block", "--student", "bob", "--force"],
        cwd=course.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with Gradebook(course.db_url) as gb:
        for student in ("ann", "bob"):
            submission = gb.find_submission("block", student)
            assert submission.score == submission.max_score == lesson.max_points(hidden=True)


def test_the_run_plans_each_submission_with_its_files_time_and_a_seed_of_its_own(course):
    """plan, the run's first step: each submission's files and their fingerprint, its time
    (none for a timestamp nbgrader cannot read), a secret seed of its own, a missing notebook
    replaced by the released one; engine_tasks hands the grader those files and that seed."""
    from support.autograde_fakes import fake_grade, submit

    from instructor import autograde as pipeline

    for student in ("ann", "bob", "cy"):
        submit(course.root, student, {})
    (course.submitted / "ann" / LESSON / "timestamp.txt").write_text(
        "2026-02-01 09:00:00.000000 UTC\n"
    )
    (course.submitted / "bob" / LESSON / "timestamp.txt").write_text("last Tuesday\n")
    (course.submitted / "cy" / LESSON / f"{LESSON}.ipynb").unlink()
    jobs = [(student, LESSON) for student in ("ann", "bob", "cy")]
    run = pipeline.plan(course, jobs)
    tasks = {task.student: task for task in run.tasks.values()}
    assert run.jobs == jobs and list(tasks) == ["ann", "bob", "cy"]
    assert tasks["ann"].stamp == "2026-02-01 09:00:00.000000 UTC" and tasks["bob"].stamp is None
    assert len({task.seed for task in tasks.values()}) == 3 and all(t.seed for t in tasks.values())
    for student, task in tasks.items():
        files, digest = pipeline.submission_files(course, student, LESSON)
        assert task.files == files and task.digest == digest and not task.attempt
    assert run.outcomes[("cy", LESSON)].notes == [
        "no notebook submitted: the released one was used"
    ]
    options = {"sandbox": False, "timeout": 5.0, "scratch": None}
    work = pipeline.engine_tasks(run, fake_grade, options)
    assert list(work) == [tasks[s].key for s in ("ann", "bob", "cy")]  # in the order planned
    grader, args, kwargs = work[tasks["ann"].key]
    assert grader is fake_grade and args == (LESSON, tasks["ann"].files)
    assert kwargs == {**options, "seed": tasks["ann"].seed}


def test_sorting_out_a_batch_records_only_what_was_graded_as_it_is(course):
    """sort_out, between grading and recording: a grade to record (its report saved); a
    grading that graded nothing, the grader's failure (recorded as failed, no grade); a
    submission whose files changed while it was graded (not recorded)."""
    from support.autograde_fakes import fake_grade, submit

    from instructor import autograde as pipeline
    from instructor import gradings

    for student in ("ann", "bob", "cy"):
        submit(course.root, student, {})
    run = pipeline.plan(course, [(student, LESSON) for student in ("ann", "bob", "cy")])
    tasks = {task.student: task for task in run.tasks.values()}
    graded = fake_grade(LESSON, tasks["ann"].files)
    submit(course.root, "cy", {LOOKUP: None})  # cy saves again while being graded
    done = pipeline.sort_out(
        run,
        [
            (tasks["ann"].key, graded, None),
            (tasks["bob"].key, None, RuntimeError("the worker died")),
            (tasks["cy"].key, graded, None),
        ],
    )
    assert done.finished == list(run.outcomes) and not done.attempts
    assert [(g.student, g.fingerprint) for g in done.ready] == [("ann", tasks["ann"].digest)]
    saved = json.loads((course.results / "ann" / f"{LESSON}.json").read_text())
    assert saved["fingerprint"] == tasks["ann"].digest and saved["graders"] == run.graders
    bob, cy = run.outcomes[("bob", LESSON)], run.outcomes[("cy", LESSON)]
    assert not bob.graded and "the worker died" in bob.notes[0] and "stands" in bob.notes[0]
    assert gradings.entry(course.root, "bob", LESSON)["failed"]["cause"].endswith("the worker died")
    assert not cy.graded and cy.notes == ["the submission changed while it was graded"]
    assert not (course.results / "bob").exists() and not (course.results / "cy").exists()


def test_a_submission_time_is_what_nbgrader_reads_or_none(tmp_path):
    from instructor.autograde import submission_time

    assert submission_time(tmp_path) is None  # no timestamp.txt
    (tmp_path / "timestamp.txt").write_text("2026-02-01 12:30:00.000000 UTC\n")
    assert submission_time(tmp_path) == "2026-02-01 12:30:00.000000 UTC"
    (tmp_path / "timestamp.txt").write_text("soon\n")
    assert submission_time(tmp_path) is None
