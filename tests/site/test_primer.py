"""The primer introduces every tensor operation the chapters' examples use, before they use it.

For each page in reading order (the primer, then the chapters in the manifest's order), the test
lists the PyTorch calls in the Python blocks a reader sees (``torch.X(...)``, ``F.X(...)``,
``nn.X(...)`` and methods of ``torch.Tensor``) and checks that each one is named in the prose
(in inline code) of the primer or of an earlier chapter; in the primer itself, above its first
use. Hidden set-up blocks (``exec="on"`` without ``source=``) are not read: nobody sees them.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
COURSE = ROOT / "course"
sys.path.append(str(ROOT / "site" / "hooks"))
from markdown_scan import fenced_blocks, fenced_lines  # noqa: E402  (the hooks' own scanner)

LESSONS = sorted(
    tomllib.loads((COURSE / "lessons.toml").read_text(encoding="utf-8"))["lesson"],
    key=lambda lesson: lesson["number"],
)
NAMESPACES = {"torch", "F", "nn", "functional"}  # torch.X, F.X, nn.X, torch.nn.functional.X
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def torch_calls(markdown: str) -> dict[str, int]:
    """Name -> line of its first call in the page's Python blocks that the reader sees."""
    lines = markdown.split("\n")
    first: dict[str, int] = {}
    for block in fenced_blocks(lines):
        info = block.info
        if not re.match(r"(python|py)\b", info) or "exec=" in info and "source=" not in info:
            continue
        try:
            tree = ast.parse("\n".join(lines[block.start + 1 : block.end]))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            name, owner = node.func.attr, node.func.value
            named = isinstance(owner, ast.Name | ast.Attribute) and (
                getattr(owner, "id", None) in NAMESPACES
                or getattr(owner, "attr", None) in NAMESPACES
            )
            if named or (hasattr(torch.Tensor, name) and not name.startswith("_")):
                line = block.start + 1 + node.lineno  # 1-based: the fence is line start + 1
                first[name] = min(first.get(name, line), line)
    return first


def prose_names(markdown: str) -> dict[str, int]:
    """Identifier -> line of its first mention in inline code outside code blocks."""
    lines = markdown.split("\n")
    inside = fenced_lines(lines)
    prose = "\n".join("" if code else line for line, code in zip(lines, inside, strict=True))
    first: dict[str, int] = {}
    for span in re.finditer(r"`([^`]+)`", prose):
        line = prose.count("\n", 0, span.start()) + 1
        for name in IDENTIFIER.findall(span.group(1)):
            first.setdefault(name, line)
    return first


def test_every_tensor_operation_is_introduced_before_it_is_used() -> None:
    pages = ["primer.md", *(lesson["page"] for lesson in LESSONS)]
    known: set[str] = set()  # named in the prose of the primer or an earlier chapter
    unexplained = []
    for page in pages:
        markdown = (COURSE / page).read_text(encoding="utf-8")
        named = prose_names(markdown)
        for name, line in sorted(torch_calls(markdown).items()):
            introduced = name in known or (page == "primer.md" and named.get(name, line) < line)
            if not introduced:
                unexplained.append(f"course/{page}:{line}: {name}")
        known |= set(named)
    assert not unexplained, (
        "tensor operations used before the primer (or an earlier chapter) names them; add "
        "them to the primer's prose or its toolbox table:\n" + "\n".join(unexplained)
    )


def test_the_check_sees_calls_and_hidden_blocks() -> None:
    page = (
        "Use `x.sum()` here.\n\n"
        '```python exec="on" source="above"\nx.sum()\ntorch.cat([x])\n```\n\n'
        '```python exec="on"\ntorch.set_num_threads(1)\n```\n'
    )
    assert set(torch_calls(page)) == {"sum", "cat"}
    assert "sum" in prose_names(page) and "cat" not in prose_names(page)
