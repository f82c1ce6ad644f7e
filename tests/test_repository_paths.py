"""Every repository path that a docstring, a comment, a Markdown page or a message names exists,
and no text names what a reader of the repository cannot open: an issue's number or a design
document kept outside it.

A path is a word that starts with one of the repository's top-level folders (``graders/...``,
``course/chapters/...``); ``FILE::name`` also needs ``name`` defined in that file. Placeholders
are written in capitals (``exercises/MODULE.py``, ``answers_SLUG.pt``) or with ``...`` and are
not paths; output folders (build/, runs/, .nox/) are made by the commands and are left out.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
THIS = Path(__file__).resolve()  # its own examples name gone paths on purpose
MADE_BY_COMMANDS = {"build", "runs", ".nox", "dist"}
TEXT = {".py", ".md", ".toml", ".yml", ".yaml", ".js", ".css", ".html", ".sh", ".cfg", ".txt"}
PLACEHOLDER = re.compile(r"[A-Z]{2,}|\.\.\.|[*{}<>$]")


# Names that mean something only where the project is planned, not in the repository.
OUTSIDE = re.compile(r"\bCOURSE\.md\b|\b[Ii]ssues? #?\d+|\bissue \d+'s\b")


def _tracked() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [name for name in listed if (ROOT / name).is_file()]


def _top_folders(files: list[str]) -> set[str]:
    return {name.split("/")[0] for name in files if "/" in name} - MADE_BY_COMMANDS


def _named_paths(text: str, folders: set[str]) -> Iterator[tuple[str, str | None, int]]:
    alternatives = "|".join(re.escape(folder) for folder in sorted(folders))
    pattern = re.compile(rf"(?<![\w./-])((?:{alternatives})/[\w./*{{}}<>$-]*[\w*}}>$])(?:::(\w+))?")
    for match in pattern.finditer(text):
        yield match.group(1), match.group(2), text.count("\n", 0, match.start()) + 1


def _defines(path: Path, name: str) -> bool:
    source = path.read_text(encoding="utf-8", errors="replace")
    definition = rf"^\s*(?:def|class|async def)\s+{name}\b|^{name}\s*[:=]"
    return re.search(definition, source, re.M) is not None


def _exists(path: str) -> bool:
    target = ROOT / path
    return target.exists() or target.with_suffix(".py").exists()


def stale_references(texts: dict[str, str], folders: set[str]) -> list[str]:
    """``FILE:LINE: why`` for each path named in ``texts`` (file name -> its text) that is gone."""
    found = []
    for name, text in texts.items():
        for path, symbol, line in _named_paths(text, folders):
            if PLACEHOLDER.search(path):
                continue
            if not _exists(path):
                found.append(f"{name}:{line}: {path} does not exist")
            elif symbol and (ROOT / path).is_file() and not _defines(ROOT / path, symbol):
                found.append(f"{name}:{line}: {path} defines no {symbol}")
    return found


def _texts(files: list[str]) -> dict[str, str]:
    return {
        name: (ROOT / name).read_text(encoding="utf-8", errors="replace")
        for name in files
        if (Path(name).suffix in TEXT or name.startswith(".ci/")) and ROOT / name != THIS
    }


def outside_references(texts: dict[str, str]) -> list[str]:
    """``FILE:LINE: NAME`` for each issue number or outside document that ``texts`` names."""
    return [
        f"{name}:{text.count(chr(10), 0, match.start()) + 1}: {match.group()}"
        for name, text in texts.items()
        for match in OUTSIDE.finditer(text)
    ]


def test_every_named_repository_path_exists() -> None:
    files = _tracked()
    stale = stale_references(_texts(files), _top_folders(files))
    assert not stale, "stale references to repository paths:\n" + "\n".join(stale)


def test_no_text_names_an_issue_number_or_a_document_outside_the_repository() -> None:
    found = outside_references(_texts(_tracked()))
    assert not found, "say what the thing is instead of where it was planned:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("the watch (issue 33) refuses it", True),
        ("as Issue #12 asked", True),
        ("what issue 18's attack did", True),
        ("see COURSE.md for the table", True),
        ("an issue with 3 tensors", False),
        ("the course's markdown", False),
    ],
)
def test_an_outside_reference_is_found(text: str, found: bool) -> None:
    assert bool(outside_references({"page.md": text})) is found


@pytest.mark.parametrize(
    ("text", "stale"),
    [
        ("see graders/secret/oracles.py for the answers", True),
        ("see graders/secret/oracles/ for the answers", False),
        ("`gpt/data.py::packed_rows` builds packed rows", True),
        ("`gpt/model.py::GPT` is the model", False),
        ("the stub of exercises/MODULE.py and course/chapters/NN-SLUG.md", False),
        ("the report lands in build/grading-report.json", False),
    ],
)
def test_a_stale_reference_is_found(text: str, stale: bool) -> None:
    folders = _top_folders(_tracked())
    assert bool(stale_references({"page.md": text}, folders)) is stale
