"""The grading plugin's own decisions (graders/plugin.py): error-path checks count only when
their function computes its values (a stub that raises ValueError naming its
arguments earned the "raises ValueError" checks with no exercise written)."""

from __future__ import annotations

import io
import secrets

import pytest
from variants import Variant, build_target

from core.manifest import load_manifest
from graders.hints import ERROR_PATH

pytestmark = pytest.mark.slow
MANIFEST = load_manifest()

# Stubs that raise ValueError naming their arguments, whatever they are given.
STUBS = [
    Variant(
        "embeddings",
        "add_positions",
        "raises",
        """
        def add_positions(vectors, pos_table):
            T, L = vectors.shape[1], pos_table.shape[0]
            raise ValueError(f"sequence length T={T} does not fit L={L} positions")
        """,
    ),
    Variant(
        "block",
        "split_heads",
        "raises",
        """
        def split_heads(x, n_head):
            raise ValueError(f"C={x.shape[-1]} is not a multiple of n_head={n_head}")
        """,
    ),
    Variant(
        "training",
        "lr_at",
        "raises",
        """
        def lr_at(step, *, max_lr, min_lr, warmup_steps, max_steps):
            raise ValueError(f"warmup_steps={warmup_steps} max_steps={max_steps}")
        """,
    ),
]


def test_an_error_raised_by_a_stub_earns_nothing(tmp_path):
    import graders

    report = graders.grade(
        build_target(tmp_path, STUBS),
        lessons=sorted({stub.module for stub in STUBS}),
        hidden=True,
        functions=[stub.function for stub in STUBS],
        json_path=tmp_path / "r.json",
    )
    checks = [check for lesson in report["lessons"] for check in lesson["checks"]]
    error_paths = {c.id for c in MANIFEST.checks if c.error_path}
    gated = [c for c in checks if c["id"] in error_paths]
    assert len(gated) == len(STUBS), [c["id"] for c in checks]
    assert report["points"] == 0, [c["id"] for c in checks if c["passed"]]
    for check in gated:  # told with the mistake of the function's values
        assert check["detail"] == ERROR_PATH.format(function=check["function"]), check
        first = next(c for c in checks if c["function"] == check["function"] and c is not check)
        assert check["hint"] == first["hint"] and check["hint"], check


def _edit(path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_honest_code_the_old_reading_refused_keeps_every_point(tmp_path):
    """Honest submissions a reading of names once refused, together: gelu's constant named _C,
    a __main__ self-test against F.layer_norm and tiktoken, p.data in adamw_step, gc.collect()
    and getattr(module, name) in fit, a variable named library, sys.path.insert,
    inspect.stack() in an error message, a module __getattr__, importlib.metadata in the
    tokenizer's module. Full marks, public and hidden, and nothing flagged."""
    import graders

    target = build_target(tmp_path)
    block = target / "block.py"
    _edit(block, "    inner = math.sqrt(2.0 / math.pi) * (x", "    inner = _C * (x")
    block.write_text(
        block.read_text(encoding="utf-8")
        + "\n_C = math.sqrt(2.0 / math.pi)\n\n"
        + 'if __name__ == "__main__":\n'
        + "    import tiktoken\n\n"
        + "    x, w, b = torch.randn(2, 4), torch.ones(4), torch.zeros(4)\n"
        + "    assert torch.allclose(layer_norm(x, w, b), F.layer_norm(x, (4,), w, b))\n"
        + "    assert tiktoken.get_encoding('gpt2').n_vocab == 50257\n",
        encoding="utf-8",
    )
    training = target / "training.py"
    _edit(training, "        decayed = p * (1", "        decayed = p.data * (1")
    _edit(
        training,
        "import math\n",
        "import gc\nimport inspect\nimport math\nimport os\nimport sys\n\n"
        "sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))\n"
        "library = {'optimizer': 'by hand'}\n",
    )
    fit_body = "    # BEGIN SOLUTION\n"
    text = training.read_text(encoding="utf-8")
    at = text.index(fit_body, text.index("def fit("))
    training.write_text(
        text[:at]
        + fit_body
        + "    gc.collect()\n    getattr(model, 'train')(True)\n"
        + text[at + len(fit_body) :]
        + "\n\ndef _caller() -> str:\n    return inspect.stack()[1].function\n\n\n"
        + "def __getattr__(name: str):\n"
        + "    raise AttributeError(f'training has no {name} (called from {_caller()})')\n",
        encoding="utf-8",
    )
    tokens = target / "tokens.py"
    _edit(
        tokens,
        "import regex\n",
        "import importlib.metadata\n\nimport regex\n\n"
        "REGEX = importlib.metadata.version('regex')\n",
    )
    report = graders.grade(
        target,
        lessons=["tokens", "block", "training"],
        hidden=True,
        json_path=tmp_path / "r.json",
    )
    for lesson in report["lessons"]:
        failed = [(c["id"], c["detail"]) for c in lesson["checks"] if not c["passed"]]
        assert lesson["points"] == lesson["max_points"] > 0, (lesson["slug"], failed)
        assert lesson["flagged"] == [] and lesson["import_error"] is None, lesson["slug"]


def test_a_library_optimizer_is_refused_by_its_graph_and_flagged_by_the_reading(tmp_path):
    """adamw_step stepping a torch.optim.AdamW, in a file saved with a byte-order mark (such a
    file was once left out of the reading): its traced computation holds the optimizer's own
    profiler operation, outside the rule's allow list, so the graph costs it its points; the
    reading lists it under flagged with its file and line for the instructor. Graded as
    autograde grades (a secret seed, the hidden checks), every check of adamw_step is decided
    on that graph: the hidden adamw-random too, whose inputs no release holds."""
    from rich.console import Console

    import graders
    from graders.terminal import render_lesson

    target = build_target(tmp_path)
    training = target / "training.py"
    start = "    # BEGIN SOLUTION\n    beta1, beta2 = betas\n"
    library = (
        "    # BEGIN SOLUTION\n"
        "    ps = [p.detach().clone().requires_grad_(True) for p in params]\n"
        "    opt = torch.optim.AdamW(ps, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)\n"
        "    for p, m, v in zip(ps, state.get('exp_avg', []), state.get('exp_avg_sq', [])):\n"
        "        opt.state[p] = {'step': torch.tensor(float(state['step'])),\n"
        "                        'exp_avg': m.clone(), 'exp_avg_sq': v.clone()}\n"
        "    for p, g in zip(ps, grads, strict=True):\n"
        "        p.grad = g.clone()\n"
        "    opt.step()\n"
        "    kept = [opt.state[p] for p in ps]\n"
        "    return [p.detach() for p in ps], {'step': state.get('step', 0) + 1,\n"
        "        'exp_avg': [k['exp_avg'] for k in kept],\n"
        "        'exp_avg_sq': [k['exp_avg_sq'] for k in kept]}\n"
        "    beta1, beta2 = betas\n"
    )
    _edit(training, start, library)
    text = training.read_text(encoding="utf-8")
    line = next(n for n, row in enumerate(text.splitlines(), 1) if "torch.optim.AdamW(ps" in row)
    training.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    report = graders.grade(
        target,
        lessons=["training"],
        hidden=True,
        functions=["adamw_step"],
        json_path=tmp_path / "r.json",
        input_seed=secrets.randbits(62) | 1,
        reveal_hidden=True,
    )
    (lesson,) = report["lessons"]
    (flag,) = lesson["flagged"]
    assert (flag["function"], flag["file"], flag["line"]) == ("adamw_step", "training.py", line)
    assert "torch.optim.AdamW" in flag["reason"]
    checks = [c for c in lesson["checks"] if c["function"] == "adamw_step"]
    assert "adamw-random" in {c["id"] for c in checks if c["hidden"]}, checks
    for check in checks:
        assert check["points"] == 0, check
        assert "traced computation was refused" in check["detail"], check
        assert "profiler::" in check["detail"], check
    console = Console(file=io.StringIO(), width=200)
    render_lesson(console, lesson)
    shown = console.file.getvalue()
    assert "flagged for review" in shown and f"training.py, line {line}: " in shown


def test_a_file_python_cannot_parse_fails_its_lesson_by_the_submissions_doing(tmp_path):
    """A module the lesson imports that nests too deeply for Python's parser (a
    MemoryError once failed the whole grading as the grader's fault): the grading completes, the
    lesson's import error is one line naming the file and the cause, and a lesson that does
    not import it keeps its points."""
    import graders

    target = build_target(tmp_path)
    (target / "deep.py").write_text("X = " + "-" * 100_000 + "1\n")
    _edit(
        target / "embeddings.py",
        "from __future__ import annotations\n",
        "from __future__ import annotations\n\nfrom . import deep  # noqa: F401\n",
    )
    report = graders.grade(
        target, lessons=["embeddings", "windows"], hidden=False, json_path=tmp_path / "r.json"
    )
    assert report["complete"]
    embeddings, windows = report["lessons"]
    assert embeddings["import_error"] == (
        "deep.py, line 1: MemoryError: nested too deeply for Python's parser"
    )
    assert embeddings["points"] == 0
    assert windows["points"] == windows["max_points"] > 0 and windows["import_error"] is None
