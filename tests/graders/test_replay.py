"""Nothing a student has seen decides a grade: a submission that replays the release's recorded
answers earns nothing at autograde.

The student release ships every public check's answers (graders/public/answers_<lesson>.pt),
recorded on the release's inputs. The submission planted here has no exercise code at all:
each function looks the digest of the inputs it is given up in those files and returns the
recorded answer. On the release's own inputs (the public seed) it scores, which shows that
the test can fail; on the inputs of a grading run's secret seed, as instructor autograde
grades (graders/answers.py, instructor/grading.py), it earns 0, public and hidden checks
alike, while solutions/ keeps every point on the same seed's inputs
(test_graders.py's solutions_report).
"""

from __future__ import annotations

import inspect
import json
import os
import textwrap
from pathlib import Path

import pytest
from support import forkserver

import graders
from core.manifest import load_manifest
from graders import answers
from graders.runner import GradingError

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
MANIFEST = load_manifest()
SECRET = 0x5EC12E7  # a grading run's secret seed, fixed here so that the test is deterministic

# The release's recorded answers, every lesson's, in one table: a module of the planted package
# of its own, so that a lesson process that imports several lesson modules reads them once.
# The files are the release's own: the full unpickler reads them in a quarter of the
# weights-only one's time, in every lesson process.
TABLE = """
import torch

TABLE = {{}}
for _path in {paths!r}:
    TABLE.update(torch.load(_path, weights_only=False)["answers"])
"""

LOOKUP = '''
import copy as _copy
import hashlib
import inspect as _inspect

import torch

from ._recorded import TABLE as _TABLE

{digest}

{feed}


def _replaying(name, stub):
    """``name`` answered from the release's recorded answers: the digest of the inputs as
    given, and with the stub's defaults filled in (the checks ask the oracles with them)."""
    signature = _inspect.signature(stub)

    def replay(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            bound = None
        questions = [(args, kwargs)]
        if bound is not None:
            bound.apply_defaults()
            full = tuple(bound.arguments.values())
            questions += [(full[:n], {{}}) for n in range(len(args), len(full) + 1)]
        for given, named in questions:
            try:
                key = digest(name, given, named)
            except TypeError:  # not plain data (a model, a generator): nothing recorded
                continue
            if key in _TABLE:
                return _copy.deepcopy(_TABLE[key])
        raise LookupError(f"the release recorded no answer for these inputs of {{name}}")

    replay.__name__ = name
    return replay


for _name in {functions!r}:
    globals()[_name] = _replaying(_name, globals()[_name])
'''


def build_replaying_package(answer_files: list[Path], dest: Path) -> Path:
    """exercises/ with every lesson function replaced by a look-up in ``answer_files``."""
    package = dest / "exercises"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "_recorded.py").write_text(TABLE.format(paths=[str(p) for p in answer_files]))
    digest = inspect.getsource(answers.digest)
    feed = inspect.getsource(answers._feed)
    for lesson in MANIFEST.lessons:
        stub = (ROOT / "exercises" / f"{lesson.module}.py").read_text(encoding="utf-8")
        functions = [name for name in lesson.functions if name[:1].islower()]  # not classes
        lookup = LOOKUP.format(
            digest=textwrap.dedent(digest),
            feed=textwrap.dedent(feed),
            functions=functions,
        )
        (package / f"{lesson.module}.py").write_text(stub + "\n" + lookup, encoding="utf-8")
    return package


def grade(target: Path, tmp: Path, *, hidden: bool, seed: int) -> dict[str, int]:
    """Points per lesson, graded as autograde's harness grades (``python -m graders``, the
    seed in COURSE_INPUT_SEED), public and hidden checks when ``hidden``."""
    report = tmp / f"report-{target.parent.name}-{hidden}-{seed}.json"
    command = ["-m", "graders", "--target", str(target), "--json", str(report)]
    env = dict(os.environ, PYTHONPATH=str(ROOT), COURSE_INPUT_SEED=str(seed))
    done = forkserver.run(
        command + ["--hidden"] * hidden,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(report.read_text())
    return {lesson["slug"]: lesson["points"] for lesson in data["lessons"]}


def earned(data: dict[str, int]) -> int:
    return sum(data.values())


@pytest.fixture(scope="module")
def replaying(released_course, tmp_path_factory) -> Path:
    files = sorted((released_course / "release").glob("*/graders/public/answers_*.pt"))
    assert len(files) == len([lesson for lesson in MANIFEST.lessons if lesson.checks])
    return build_replaying_package(files, tmp_path_factory.mktemp("replaying"))


def test_replayed_answers_score_on_the_release_inputs(replaying, tmp_path):
    """The planted submission works: on the inputs the release recorded, it earns a third of
    the public points or more, in most lessons (else the test below proves nothing; checks
    that run a scenario, such as every training check, are never served by a look-up)."""
    points = grade(replaying, tmp_path, hidden=False, seed=answers.PUBLIC_SEED)
    public = sum(c.points for lesson in MANIFEST.lessons for c in lesson.checks if not c.hidden)
    assert earned(points) >= public / 3, points
    assert sum(1 for slug in points if points[slug]) >= 7, points


def test_replayed_answers_earn_nothing_at_autograde(replaying, tmp_path):
    points = grade(replaying, tmp_path, hidden=True, seed=SECRET)
    assert earned(points) == 0, points


def test_a_release_refuses_a_secret_seed(monkeypatch, tmp_path):
    """Without the oracles (the release), nothing could answer drawn inputs: grading says so
    in one line instead of failing every check."""
    monkeypatch.setattr(answers, "_oracles", None)
    with pytest.raises(GradingError, match="COURSE_INPUT_SEED"):
        graders.grade(
            ROOT / "solutions", lessons=["attention"], json_path=tmp_path / "r.json", input_seed=7
        )


def test_the_public_seed_gives_the_release_inputs_and_a_secret_one_others():
    from graders.checking import randn

    public = randn(3, 4)
    with answers.secret_inputs(SECRET):
        drawn = randn(3, 4)
        assert answers.drawn(3) not in (3, answers.drawn(4))
    assert not bool((public == drawn).all())
    assert bool((randn(3, 4) == public).all())


def test_autograde_hands_each_submission_a_secret_seed(monkeypatch):
    """instructor autograde's grading run (instructor/grading.py) gets a seed of its own in the
    checker's environment, a new one every time, never the public one."""
    from instructor import grading

    seen: list[str] = []

    def run(command, env, timeout):
        seen.append(env["COURSE_INPUT_SEED"])
        return None, b""  # stopped at its limit: no grading, the seed is what is looked at

    monkeypatch.setattr(grading, "_run", run)
    for _ in range(2):
        grading.grade_files("attention", {"attention.py": b""}, sandbox=False)
    assert len(set(seen)) == 2 and str(answers.PUBLIC_SEED) not in seen, seen
