"""graders/where.py: the command, the site and the install line that fit where the graders run
(the repository, or a lesson folder of the student release, which has release.json)."""

from __future__ import annotations

import json

from graders.where import grade_command, in_release, missing_module, released_site


def _release(folder, site="https://course.example.org/gpt"):
    (folder / "release.json").write_text(json.dumps({"site_url": site, "lesson": "windows"}))
    return folder


def test_the_repository_grades_with_nox_and_a_release_with_python_m_graders(tmp_path):
    assert not in_release(tmp_path) and released_site(tmp_path) is None
    assert grade_command("windows", root=tmp_path) == "nox -s grade -- windows"
    assert grade_command(watch=True, root=tmp_path) == "nox -s grade -- --watch"
    assert grade_command(root=tmp_path) == "nox -s grade"
    _release(tmp_path)
    assert in_release(tmp_path) and released_site(tmp_path) == "https://course.example.org/gpt/"
    assert grade_command("windows", root=tmp_path) == "python -m graders windows"
    assert (
        grade_command("windows", watch=True, root=tmp_path) == "python -m graders --watch windows"
    )


def test_a_missing_package_is_one_line_on_what_to_install(tmp_path):
    error = ModuleNotFoundError("No module named 'hypothesis'", name="hypothesis")
    here = missing_module(error, tmp_path)
    assert "\n" not in here and "'hypothesis'" in here and "nox -s grade" in here
    released = missing_module(error, _release(tmp_path))
    assert "\n" not in released and "'hypothesis'" in released
    assert "pip install -r requirements.txt" in released and "nox -s" not in released
    assert "not graded" not in released and "ModuleNotFoundError" not in released
