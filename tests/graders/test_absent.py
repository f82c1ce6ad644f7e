"""graders/worker/absent.py: the tokenizer libraries are absent where the student's code runs.
A tokens module that reaches tiktoken (directly, through gpt.vocab's Encoding, or after taking
the finder out of sys.meta_path, which the sandbox's empty folders answer) loses encode's,
decode's and train_bpe's points, each with one line saying why; a correct tokenizer that finds
GPT-2's ranks file through importlib.metadata keeps every point."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_replay import SECRET

import graders
from core.manifest import load_manifest

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = (ROOT / "solutions" / "tokens.py").read_text(encoding="utf-8")

TWINS = """

def encode(text):
    import tiktoken

    return tiktoken.get_encoding("gpt2").encode_ordinary(text)


def decode(ids):
    from gpt.vocab import gpt2_encoding

    return gpt2_encoding().decode(ids)


def train_bpe(text, vocab_size):
    import sys

    sys.meta_path[:] = [f for f in sys.meta_path if "Absent" not in type(f).__name__]
    from tiktoken._educational import bpe_train

    return bpe_train(text, vocab_size, "")
"""

# The reference, but GPT-2's ranks read from the file the whisper package ships, found through
# its metadata, instead of gpt.vocab's helpers.
OWN_RANKS = """import base64
import importlib.metadata

from gpt.vocab import EOT_ID, GPT2_PATTERN


@functools.cache
def bpe_ranks() -> dict[bytes, int]:
    dist = importlib.metadata.distribution("openai-whisper")
    ranks = {}
    with open(dist.locate_file("whisper/assets/gpt2.tiktoken"), "rb") as file:
        for line in file.read().splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
    return ranks


@functools.cache
def id_to_bytes() -> list[bytes]:
    table = [b""] * 50257
    for token, rank in bpe_ranks().items():
        table[rank] = token
    table[EOT_ID] = b"<|endoftext|>"
    return table
"""


def test_a_tokenizer_library_cannot_be_imported_after_make_absent():
    script = (
        "import sys, tiktoken\n"
        "from graders.worker.absent import make_absent\n"
        "make_absent()\n"
        "assert 'tiktoken' not in sys.modules\n"
        "import regex, gpt.vocab\n"  # what the lesson needs still imports
        "for name in ('tiktoken', 'tiktoken.load', 'tokenizers', 'transformers'):\n"
        "    try:\n"
        "        __import__(name)\n"
        "    except ModuleNotFoundError as error:\n"
        "        print(type(error).__name__, error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    lines = done.stdout.splitlines()
    assert len(lines) == 4 and all(line.startswith("AbsentLibrary ") for line in lines), lines
    assert "tiktoken is not available to the lesson's code" in lines[0]
    assert "tokenizers is not available" in lines[2]


def _graded(tmp_path: Path, name: str, source: str, sandbox: bool = True) -> dict:
    """``source`` as the tokens module, graded as autograde grades. A test's submissions share
    one folder: the sandboxed worker the pool keeps for that folder grades the next one, its
    copy made again from the files as they are now (graders/pool.py), instead of a new worker
    importing torch again."""
    target = tmp_path / "submission"
    target.mkdir(exist_ok=True)
    (target / "tokens.py").write_text(source, encoding="utf-8")
    return graders.grade(
        target,
        lessons=["tokens"],
        hidden=True,
        sandbox=sandbox,
        input_seed=SECRET,
        json_path=tmp_path / f"{name}.json",
    )


@pytest.mark.slow
def test_tiktoken_earns_nothing_and_an_own_reading_of_the_ranks_everything(tmp_path, bubblewrap):
    tokens = load_manifest().lesson("tokens")
    lesson = _graded(tmp_path, "twins", REFERENCE + TWINS)["lessons"][0]
    by_function: dict[str, list[dict]] = {}
    for row in lesson["checks"]:
        by_function.setdefault(row["function"], []).append(row)
    for function in ("encode", "decode", "train_bpe"):
        assert not any(row["passed"] for row in by_function[function]), function
    details = " ".join(row["detail"] or "" for row in by_function["encode"])
    assert "tiktoken is not available to the lesson's code" in details
    assert all(row["passed"] for row in by_function["split_pieces"] + by_function["bpe_merge"])
    # absent, not read for: only taking the finder out is flagged (it hides what code calls)
    assert all("meta_path" in entry["reason"] for entry in lesson["flagged"])
    honest = REFERENCE.replace(
        "from gpt.vocab import EOT_ID, GPT2_PATTERN, bpe_ranks, id_to_bytes\n", OWN_RANKS
    )
    assert honest != REFERENCE
    report = _graded(tmp_path, "own-ranks", honest)
    assert report["points"] == report["max_points"] == tokens.max_points(hidden=True)


@pytest.mark.slow
def test_without_the_sandbox_a_plain_import_of_a_tokenizer_library_still_fails(tmp_path):
    """Local grading and Gradescope's fallback have no sandbox to mask the packages' folders:
    the finder is the lesson process's own, which code that takes it out of sys.meta_path
    gets past (the limit docs/instructors.md's "What a grade rests on" states). What holds
    there: a plain import, and gpt.vocab's tiktoken Encoding, fail with the finder's line."""
    twins = TWINS[: TWINS.index("def train_bpe")]  # no code that takes the finder out
    lesson = _graded(tmp_path, "twins", REFERENCE + twins, sandbox=False)["lessons"][0]
    for function in ("encode", "decode"):
        rows = [row for row in lesson["checks"] if row["function"] == function]
        assert rows and not any(row["passed"] for row in rows), function
        details = " ".join(row["detail"] or "" for row in rows)
        assert "tiktoken is not available to the lesson's code" in details, function
