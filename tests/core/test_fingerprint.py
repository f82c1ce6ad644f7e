"""core/fingerprint.py: a lesson's fingerprint covers its module and the package's modules it
imports, files Python cannot parse included; the graders' digest covers the graders and the
manifest."""

from __future__ import annotations

import shutil
from pathlib import Path

from core.fingerprint import fingerprint, graders_digest, lesson_files
from core.manifest import ROOT


def _package(tmp_path: Path) -> Path:
    target = tmp_path / "student"
    shutil.copytree(ROOT / "solutions", target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def test_the_fingerprint_follows_the_module_and_what_it_imports(tmp_path: Path) -> None:
    target = _package(tmp_path)
    block, attention = fingerprint(target, "block"), fingerprint(target, "attention")
    assert target / "attention.py" in lesson_files(target, "block")
    (target / "tokens.py").write_text((target / "tokens.py").read_text() + "\n# edited\n")
    assert (fingerprint(target, "block"), fingerprint(target, "attention")) == (block, attention)
    # block.py does `from .attention import attention`: an edit of attention.py is one of block's
    (target / "attention.py").write_text((target / "attention.py").read_text() + "\n# edited\n")
    assert fingerprint(target, "attention") != attention
    assert fingerprint(target, "block") != block


def test_a_file_python_cannot_parse_still_has_a_fingerprint(tmp_path: Path) -> None:
    """A module the lesson imports that nests deeper than Python's parser goes (a MemoryError
    while parsing): the fingerprint covers it all the same."""
    target = _package(tmp_path)
    (target / "deep.py").write_text("X = " + "-" * 100_000 + "1\n")
    embeddings = target / "embeddings.py"
    embeddings.write_text("from . import deep\n" + embeddings.read_text())
    before = fingerprint(target, "embeddings")
    (target / "deep.py").write_text("X = 1\n")
    assert fingerprint(target, "embeddings") != before


def test_the_graders_digest_changes_with_a_grader_and_with_the_manifest(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "graders" / "public").mkdir(parents=True)
    (tree / "course").mkdir()
    (tree / "graders" / "public" / "test_tokens.py").write_text("def test(): pass\n")
    (tree / "course" / "lessons.toml").write_text("# lessons\n")
    before = graders_digest(tree)
    (tree / "graders" / "public" / "test_tokens.py").write_text("def test(): assert 0\n")
    after_grader = graders_digest(tree)
    (tree / "course" / "lessons.toml").write_text("# lessons, points changed\n")
    assert len({before, after_grader, graders_digest(tree)}) == 3
