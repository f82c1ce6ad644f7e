"""The chapters' examples as cells: the parse, the notebooks made from it, and one executed."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "course" / "chapters").glob("*.md"))


def _hook():
    spec = importlib.util.spec_from_file_location(
        "notebooks_hook", ROOT / "site/hooks/notebooks.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


hook = _hook()


def test_parse_finds_each_exec_block_once_with_its_kind() -> None:
    markdown = "\n".join(
        [
            "# Title",
            "## First {#first}",
            '```python exec="on" source="above" result="text" session="s"',
            "x = 1",
            "```",
            "```python",
            "not_run = True",
            "```",
            "### Figure",
            '````python exec="on" html="1" session="s"',
            "print('```')",
            "````",
            '    ```python exec="on"',
            "    indented = 'not a cell'",
            "    ```",
        ]
    )
    cells = hook.parse_cells(markdown)
    assert [c.source for c in cells] == ["x = 1", "print('```')"]
    assert [(c.html, c.shown) for c in cells] == [(False, True), (True, False)]
    assert [c.heading for c in cells] == ["## First", "### Figure"]


def test_marked_page_carries_markers_run_box_and_sources() -> None:
    markdown = '# T\n\n```python exec="on" source="above"\nprint("</script>")\n```\n'
    marked = hook.mark_cells(markdown, "chapters/09-x.md", "x")
    assert marked.index("Run these examples yourself") < marked.index('data-cell="0"')
    assert "../notebooks/09-x.ipynb" in marked
    assert marked.count("course-cell-end") == 1
    payload = re.search(r'id="course-cells">(.*)</script>', marked).group(1)
    assert "</script>" not in payload  # the source's own "</script>" is escaped
    data = json.loads(payload)
    assert data["cells"] == [{"source": 'print("</script>")', "html": False, "shown": True}]
    assert data["lesson"] == "x"


CELL = '```python exec="on"\nprint(1)\n```\n'


@pytest.mark.parametrize(
    ("before", "box_first"),
    [
        ("Some prose.\n\nLet us check that\nnumerically:\n\n", True),  # the box before "Let us"
        ("Some prose.\n\nA sentence that ends here.\n\n", False),  # the box before the code
        ("- a list item that ends with:\n\n", False),  # not a paragraph of its own
    ],
)
def test_the_run_box_never_parts_a_colon_from_its_code(before: str, box_first: bool) -> None:
    marked = hook.mark_cells(f"# T\n\n{before}{CELL}", "chapters/09-x.md", "x")
    box = marked.index("Run these examples yourself")
    last_line = before.rstrip().splitlines()[-1]
    assert "Some prose." not in before or marked.index("Some prose.") < box
    assert (box < marked.index(last_line)) is box_first
    assert box < marked.index('data-cell="0"') < marked.index("print(1)")


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_notebook_is_valid(chapter: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    text = chapter.read_text(encoding="utf-8")
    cells = hook.parse_cells(text)
    blocks = len(re.findall(r'^`{3,}python exec="on"', text, re.M))
    assert len(cells) == blocks > 0
    nb = nbformat.reads(json.dumps(hook.notebook("T", chapter.name, cells)), as_version=4)
    nbformat.validate(nb)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert len(code) == len(cells) + sum(c.html for c in cells)  # a figure adds its display


def test_a_chapter_notebook_runs_top_to_bottom() -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    chapter = ROOT / "course" / "chapters" / "03-windows.md"
    cells = hook.parse_cells(chapter.read_text(encoding="utf-8"))
    nb = nbformat.reads(json.dumps(hook.notebook("T", chapter.name, cells)), as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute()  # raises CellExecutionError, naming the cell, on any failure
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert printed.strip(), "the examples print their results"
    figures = [o for o in outputs if "text/html" in o.get("data", {})]
    assert len(figures) == sum(c.html for c in cells)  # every figure is shown as HTML
