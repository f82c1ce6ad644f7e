"""A class run through nbgrader's exchange on a real JupyterHub, end to end.

The instructor (this process, root) has the course released (a copy of the run's released
course) and ``nbgrader release_assignment``s a lesson into an exchange folder; JupyterHub
(``jupyterhub`` from PyPI, its proxy from npm) spawns a Jupyter server for each of two students
as a system user of their own, created here with ``useradd``. Through the hub's proxy, each
student's server fetches, validates and submits with nbgrader's own server extensions (the
Assignments view's API) and saves the lesson module with Jupyter's contents API, so every file
in a student's home is written by that student's process. Ann submits twice (a stub, then the
reference), Bob once, after the due date. The instructor collects, autogrades (sandboxed, each
submission on a secret seed of its own), writes the feedback and releases it; Bob fetches his
through his server, and Ann hers by clicking "Fetch Feedback" in her Assignments view in
chromium, which then lists both her submissions and links the feedback of the one graded.

Every wait is for a condition (the hub answering, a server ready, a page element shown), with
a hang guard far above what a loaded 2-core machine needs; no verdict depends on speed. It is
skipped only where npm or system users are not available, and fails under CI instead.
"""

from __future__ import annotations

import csv
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.extras import require_extra
from support.release_site import RELEASED_SITE

require_extra("nbgrader", "the grading extra (nbgrader) is not installed")
require_extra("jupyterhub", "the hub extra (jupyterhub) is not installed")
from support import hub_proxy  # noqa: E402
from support.instructor_commands import (  # noqa: E402
    LESSON,
    ROOT,
    instructor,
    linux_only,
    needs_bwrap,
    released_points,
)
from support.system_packages import require, skip_or_fail  # noqa: E402

pytestmark = [pytest.mark.slow, linux_only, needs_bwrap]

COURSE_ID = "gpt-from-the-ground-up"  # instructor.course.COURSE_ID, which the exchange names
PASSWORD = "class-password"  # the hub's DummyAuthenticator: one shared password, tests only
HANG_GUARD = 600  # seconds: no step of a student's or the hub's takes near this, even loaded


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _open_folder(prefix: str, mode: int = 0o755) -> Path:
    """A folder outside pytest's private (0700) temporary tree, which the students reach."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(mode)
    return folder


@pytest.fixture
def students() -> Iterator[dict[str, Path]]:
    """Two system users of their own (name -> home), made with useradd, removed after."""
    if os.geteuid() != 0:
        skip_or_fail("the JupyterHub class creates system users for its students: run as root")
    missing = [tool for tool in ("useradd", "userdel") if shutil.which(tool) is None]
    if missing:
        skip_or_fail(f"{' and '.join(missing)} not installed (`apt-get install -y passwd`)")
    homes = _open_folder("course-hub-homes-")
    made: dict[str, Path] = {}
    suffix = secrets.token_hex(3)  # runs side by side never share a user
    try:
        for first in ("ann", "bob"):
            name, home = f"{first}-{suffix}", homes / first
            subprocess.run(
                ["useradd", "--create-home", "--home-dir", str(home), "--user-group"]
                + ["--shell", "/usr/sbin/nologin", name],
                check=True,
                capture_output=True,
            )
            made[name] = home
        yield made
    finally:
        for name in made:
            subprocess.run(["userdel", "--force", name], capture_output=True)
        shutil.rmtree(homes, ignore_errors=True)


@dataclass
class Hub:
    url: str  # the proxy's public address, as students reach it
    token: str  # the test service's API token (admin of users and servers)
    log: Path

    def request(self, method: str, path: str, data: dict | None = None, body=None):
        """``method path`` through the proxy with the service's token; the decoded JSON (or
        None for an empty answer). ``data`` is sent as a form, ``body`` as JSON."""
        headers = {"Authorization": f"token {self.token}"}
        payload = None
        if data is not None:
            payload = urllib.parse.urlencode(data).encode()
        elif body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        ask = urllib.request.Request(self.url + path, payload, headers, method=method)
        with urllib.request.urlopen(ask, timeout=HANG_GUARD) as answer:
            text = answer.read()
        return json.loads(text) if text.strip() else None

    def start_server(self, user: str) -> None:
        """Start ``user``'s server and wait until the hub says it is ready."""
        self.request("POST", f"/hub/api/users/{user}/server", body={})
        deadline = time.monotonic() + HANG_GUARD
        while time.monotonic() < deadline:
            server = self.request("GET", f"/hub/api/users/{user}")["servers"].get("")
            if server and server["ready"]:
                return
            time.sleep(0.5)
        pytest.fail(f"{user}'s server was not ready in {HANG_GUARD} s:\n{self.tail()}")

    def nbgrader(self, user: str, action: str, **form: str) -> dict:
        """One action of nbgrader's Assignments view on ``user``'s server: its answer."""
        path = f"/user/{user}/assignments" + (f"/{action}" if action else "")
        if action:
            answer = self.request("POST", path, data=form)
        else:
            answer = self.request("GET", path + "?" + urllib.parse.urlencode(form))
        assert answer["success"], answer
        return answer["value"]

    def save(self, user: str, path: str, text: str) -> None:
        """Save a file in ``user``'s home as their editor does (Jupyter's contents API)."""
        model = {"type": "file", "format": "text", "content": text}
        self.request("PUT", f"/user/{user}/api/contents/{path}", body=model)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


def _hub_config(folder: Path, ports: dict[str, int], token: str, users, python, exchange_config):
    """jupyterhub_config.py: local system users, a dummy login, this environment's servers."""
    prefix = Path(sys.prefix)
    settings = {
        "JupyterHub.bind_url": f"http://127.0.0.1:{ports['public']}",
        "JupyterHub.hub_ip": "127.0.0.1",
        "JupyterHub.hub_port": ports["hub"],
        "ConfigurableHTTPProxy.api_url": f"http://127.0.0.1:{ports['proxy_api']}",
        "ConfigurableHTTPProxy.command": [str(hub_proxy.install())],
        "JupyterHub.db_url": f"sqlite:///{folder / 'jupyterhub.sqlite'}",
        "JupyterHub.cookie_secret_file": str(folder / "cookie_secret"),
        "JupyterHub.authenticator_class": "dummy",
        "DummyAuthenticator.password": PASSWORD,
        "Authenticator.allowed_users": sorted(users),
        # LocalProcessSpawner (the default): each server runs as its user, in their home.
        "Spawner.cmd": [python, "-m", "jupyterhub.singleuser"],
        "Spawner.default_url": "/tree",
        "Spawner.start_timeout": HANG_GUARD,
        "Spawner.http_timeout": HANG_GUARD,
        # The student interpreter is another prefix over this environment's packages: it finds
        # the server extensions' settings (nbgrader's Assignments view among them) and the
        # front end's extensions here; nbgrader's class settings (the exchange) come first.
        "Spawner.environment": {
            "JUPYTER_CONFIG_PATH": os.pathsep.join(
                [str(exchange_config), str(prefix / "etc" / "jupyter")]
            ),
            "JUPYTER_PATH": str(prefix / "share" / "jupyter"),
            "JUPYTERLAB_DIR": str(prefix / "share" / "jupyter" / "lab"),
        },
        "JupyterHub.services": [{"name": "course-test", "api_token": token}],
        "JupyterHub.load_roles": [
            {
                "name": "course-test",
                "scopes": ["admin:users", "admin:servers", "access:servers"],
                "services": ["course-test"],
            }
        ],
    }
    lines = [f"c.{name} = {value!r}" for name, value in settings.items()]
    path = folder / "jupyterhub_config.py"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def hub(students, student_python, exchange, tmp_path) -> Iterator[Hub]:
    """JupyterHub on the loopback, ready, with the students' servers started."""
    require("npm")  # installs JupyterHub's proxy (nox -s tests has done it already)
    hub_proxy.install()
    folder = tmp_path / "hub"
    folder.mkdir()
    ports = {name: _free_port() for name in ("public", "hub", "proxy_api")}
    token = secrets.token_hex(32)
    config = _hub_config(folder, ports, token, students, student_python, exchange.config)
    log = folder / "jupyterhub.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "jupyterhub", "-f", str(config)],
            cwd=folder,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    running = Hub(f"http://127.0.0.1:{ports['public']}", token, log)
    try:
        deadline = time.monotonic() + HANG_GUARD
        while True:
            if process.poll() is not None:
                pytest.fail(f"JupyterHub exited ({process.returncode}):\n{running.tail()}")
            try:
                running.request("GET", "/hub/api/")
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"JupyterHub did not answer in {HANG_GUARD} s:\n{running.tail()}")
                time.sleep(0.5)
        for user in students:
            running.start_server(user)
        yield running
    finally:
        # The hub stops the servers it spawned and its proxy when it is stopped.
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=HANG_GUARD)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@dataclass
class Exchange:
    root: Path  # nbgrader's exchange: one folder every user writes to
    config: Path  # the class's nbgrader settings (what /etc/jupyter would hold on a real hub)


@pytest.fixture
def exchange() -> Iterator[Exchange]:
    root = _open_folder("course-hub-exchange-", 0o777)
    config = _open_folder("course-hub-class-config-")
    (config / "nbgrader_config.py").write_text(f"c.Exchange.root = {str(root)!r}\n")
    yield Exchange(root, config)
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(config, ignore_errors=True)


@pytest.fixture
def course_folder(released_course, tmp_path, exchange, monkeypatch) -> Path:
    """The instructor's course folder, every lesson released (a copy of the course that
    ``python -m instructor release`` made once for the run, tests/conftest.py); the
    instructor's own nbgrader settings name the exchange and a late penalty (a late submission
    scores zero)."""
    own = tmp_path / "instructor-jupyter"
    own.mkdir()
    (own / "nbgrader_config.py").write_text(
        f"c.Exchange.root = {str(exchange.root)!r}\n"
        'c.LateSubmissionPlugin.penalty_method = "zero"\n'
    )
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(own))
    monkeypatch.delenv("COURSE_GRADEBOOK_URL", raising=False)
    course = tmp_path / "course"
    shutil.copytree(released_course, course)
    assert json.loads((course / "release.json").read_text())["site_url"] == RELEASED_SITE
    return course


def _nbgrader(course: Path, *args: str) -> str:
    """A plain nbgrader command of the instructor's, in the course folder; what it printed."""
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout + done.stderr


def _submissions(listing: list[dict]) -> list[dict]:
    return [s for a in listing if a["status"] == "submitted" for s in a["submissions"]]


def _feedback_file(home: Path, stamp: str) -> Path:
    return home / LESSON / "feedback" / stamp / f"{LESSON}.html"


def test_a_two_student_class_runs_through_the_exchange_on_jupyterhub(
    course_folder, exchange, students, hub, tmp_path
):
    chromium = require("chromium")
    ann, bob = students
    course_id = {"course_id": COURSE_ID, "assignment_id": LESSON}
    notebook = f"{LESSON}/{LESSON}.ipynb"
    module = f"{LESSON}/exercises/{LESSON}.py"
    reference = (ROOT / "solutions" / f"{LESSON}.py").read_text()
    total = sum(released_points(course_folder).values())

    _nbgrader(course_folder, "release_assignment", LESSON)
    released = hub.nbgrader(ann, "", course_id=COURSE_ID)
    assert [(a["assignment_id"], a["status"]) for a in released] == [(LESSON, "released")]

    # Ann fetches, validates the untouched stub (it fails), submits it, then writes the
    # lesson, validates again (it passes) and submits a second time.
    hub.nbgrader(ann, "fetch", **course_id)
    assert (students[ann] / module).stat().st_uid == _uid(ann)
    failed = hub.nbgrader(ann, "validate", path=notebook)
    assert failed.get("failed"), failed
    hub.nbgrader(ann, "submit", **course_id)
    hub.save(ann, module, reference)
    assert hub.nbgrader(ann, "validate", path=notebook).get("failed") is None
    ann_stamps = [s["timestamp"] for s in _submissions(hub.nbgrader(ann, "submit", **course_id))]
    assert len(ann_stamps) == 2

    # The lesson is due now: Bob's submission, after this, is late.
    due = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    _nbgrader(course_folder, "db", "assignment", "add", LESSON, "--duedate", due)
    hub.nbgrader(bob, "fetch", **course_id)
    hub.save(bob, module, reference)
    (bob_stamp,) = [s["timestamp"] for s in _submissions(hub.nbgrader(bob, "submit", **course_id))]

    # The instructor collects the newest submission of each, autogrades and gives feedback.
    _nbgrader(course_folder, "collect", LESSON)
    kept = {
        s: (course_folder / "submitted" / s / LESSON / "timestamp.txt").read_text()
        for s in students
    }
    assert kept == {ann: ann_stamps[-1], bob: bob_stamp}
    graded = instructor(course_folder, "autograde", LESSON)
    assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-3000:]
    with (course_folder / "grades.csv").open() as table:  # every released lesson's rows
        rows = csv.DictReader(table)
        grades = {row["student_id"]: row for row in rows if row["assignment"] == LESSON}
    as_numbers = {
        s: [float(grades[s][c]) for c in ("raw_score", "late_submission_penalty", "score")]
        for s in students
    }
    assert as_numbers == {ann: [total, 0, total], bob: [total, total, 0]}
    seeds = {k.split("/")[0]: v["seed"] for k, v in _gradings(course_folder).items()}
    assert set(seeds) == set(students) and 0 not in seeds.values()
    assert len(set(seeds.values())) == 2  # a secret seed of each submission's own
    _nbgrader(course_folder, "release_feedback", LESSON)

    listing = _submissions(hub.nbgrader(bob, "fetch_feedback", **course_id))
    assert [(s["timestamp"], s["has_local_feedback"]) for s in listing] == [(bob_stamp, True)]
    assert f"Score: 0.0 / {total:.1f}" in _feedback_file(students[bob], bob_stamp).read_text()

    _ann_fetches_her_feedback_in_chromium(hub, ann, ann_stamps, chromium, tmp_path)
    feedback = _feedback_file(students[ann], ann_stamps[-1])
    assert f"Score: {total:.1f} / {total:.1f}" in feedback.read_text()
    assert feedback.stat().st_uid == _uid(ann)
    assert not _feedback_file(students[ann], ann_stamps[0]).exists()  # never graded


def _uid(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_uid


def _gradings(course: Path) -> dict:
    return json.loads((course / "gradings.json").read_text())


def _ann_fetches_her_feedback_in_chromium(hub, ann, stamps, chromium, tmp_path) -> None:
    """Ann logs in, opens Nbgrader > Assignment List, sees her lesson downloaded and both
    submissions, clicks Fetch Feedback, and the graded one gets its "view feedback" link."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=str(chromium),
            headless=True,
            args=["--headless", "--no-sandbox", "--disable-gpu"],
            viewport={"width": 1280, "height": 900},
        )
        context.set_default_timeout(HANG_GUARD * 1000)  # a hang guard, not a speed limit
        try:
            page = context.new_page()
            page.goto(hub.url + "/hub/login")
            page.fill("input[name=username]", ann)
            page.fill("input[name=password]", PASSWORD)
            page.click("[type=submit]")
            page.wait_for_url(f"**/user/{ann}/**")
            page.goto(f"{hub.url}/user/{ann}/tree")
            page.get_by_text("Nbgrader", exact=True).click()
            page.get_by_text("Assignment List", exact=True).click()
            fetched = page.locator("#fetched_assignments_list")
            fetched.get_by_text(LESSON, exact=True).first.wait_for()
            submitted = page.locator("#submitted_assignments_list")
            for stamp in stamps:
                submitted.get_by_text(stamp).first.wait_for()
            # Released and not fetched yet: offered beside the graded submission only.
            available = submitted.get_by_text("feedback available to fetch")
            available.wait_for()
            assert available.count() == 1
            assert stamps[-1] in available.locator("xpath=..").inner_text()
            assert submitted.get_by_text("view feedback").count() == 0
            submitted.get_by_role("button", name="Fetch Feedback").click()
            link = submitted.get_by_text("view feedback")
            link.wait_for()
            assert link.count() == 1
            row = link.locator("xpath=..").inner_text()
            assert stamps[-1] in row and stamps[0] not in row
        finally:
            context.close()
