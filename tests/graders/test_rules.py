"""The checker's reading of the submitted package (graders/rules.py), on its own: no worker.

The reading is evidence for review, never a grade. It decodes files as Python's
importer does and names the file, line and cause of what it cannot decode or parse; it flags,
with file and line, what only a by-hand function's source shows (a library twin by its name,
a torch operation outside an allowlist rule's, code it cannot follow), against that function
and only there; docstrings, comments, ``__main__`` blocks and ordinary names are not evidence;
and its work grows with the size of the code, never with its square.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
from variants import RIGHT, build_target, replace_definition

from core.manifest import load_manifest
from graders.rules import MAX_FILE_BYTES, Package

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = load_manifest()
RULES = [(lesson.module, rule) for lesson in MANIFEST.lessons for rule in lesson.rules]


def _rule(function: str):
    return next(rule for _, rule in RULES if rule.function == function)


def _module(function: str) -> str:
    return next(module for module, rule in RULES if rule.function == function)


def _evidence(sources: dict, function: str) -> list:
    return Package.of_sources(sources).evidence(_module(function), _rule(function))


@pytest.mark.parametrize("folder", ["solutions", "exercises"])
def test_the_course_own_code_is_flagged_nowhere(folder):
    package = Package.read(ROOT / folder)
    for lesson in MANIFEST.lessons:
        assert package.review(lesson.module, lesson.rules) == [], lesson.slug
        assert package.cannot_import(lesson.module) is None
    assert package.unreadable == {} and package.unfollowed == {}


def test_every_correct_variant_is_flagged_nowhere(tmp_path):
    """The chapters' correct variants, each in its own copy of solutions/, read as written."""
    for number, variant in enumerate(RIGHT):
        package = Package.read(build_target(tmp_path / str(number), [variant]))
        lesson = next(x for x in MANIFEST.lessons if x.module == variant.module)
        assert package.review(lesson.module, lesson.rules) == [], variant.id


# Each library twin that its source names (an import, a torch path, the rule's names), as
# function bodies in a module that imports torch, F and math. A tensor method under another
# name (x.renorm, logits.logcumsumexp) is the operator graph's to refuse: the reading leaves it.
TWINS = {
    "layer_norm": [
        "return F.layer_norm(x, x.shape[-1:], weight, bias, eps)",
        "return torch.nn.LayerNorm(x.shape[-1])(x)",
        "return torch.layer_norm(x, x.shape[-1:], weight, bias, eps)",
        "return F.group_norm(x, 1, weight, bias, eps)",
        "return torch.ops.aten.native_layer_norm(x, x.shape[-1:], weight, bias, eps)[0]",
        """
        from torch.nn.functional import layer_norm as ln
        return ln(x, x.shape[-1:])
        """,
    ],
    "gelu": [
        "return F.gelu(x, approximate='tanh')",
        "return torch.nn.GELU('tanh')(x)",
        "return torch._C._nn.gelu(x)",
        "return F.silu(x)",
    ],
    "cross_entropy": [
        "return F.cross_entropy(logits, targets, ignore_index=ignore_index)",
        "return F.nll_loss(logits.log_softmax(-1), targets, ignore_index=ignore_index)",
        "return (logits.logsumexp(-1) - logits.gather(-1, targets[:, None])[:, 0]).mean()",
        "return -(torch.softmax(logits, -1).log()[range(len(targets)), targets]).mean()",
    ],
    "attention": [
        "return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
        "return torch.nn.functional.scaled_dot_product_attention(q, k, v)",
        "return torch.ops.aten._scaled_dot_product_attention_math(q, k, v)[0]",
    ],
    "adamw_step": [
        """
        opt = torch.optim.AdamW(params, lr=lr)
        return params, state
        """,
        """
        from torch.optim import AdamW
        return params, state
        """,
        """
        torch.optim._functional.adamw(params, grads, [], [], [], [], lr=lr)
        return params, state
        """,
        """
        torch._fused_adamw_(params, grads, [], [], [], [], lr=lr)
        return params, state
        """,
        """
        torch._foreach_lerp_(params, grads, 0.1)
        return params, state
        """,
    ],
}
SIGNATURES = {
    "layer_norm": "x, weight, bias, eps=1e-5",
    "gelu": "x",
    "cross_entropy": "logits, targets, ignore_index=-100",
    "attention": "q, k, v, mask=None",
    "adamw_step": "params, grads, state, *, lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0",
}
HEADER = "\nimport math\nimport torch\nimport torch.nn.functional as F\n"


def _solutions() -> dict[str, str]:
    return {
        path.stem: path.read_text(encoding="utf-8") for path in (ROOT / "solutions").glob("*.py")
    }


def _solutions_with(function: str, body: str) -> dict[str, str]:
    """The sources of solutions/ with ``function`` replaced by one whose body is ``body``."""
    sources = _solutions()
    module = _module(function)
    code = f"def {function}({SIGNATURES[function]}):\n" + textwrap.indent(
        textwrap.dedent(body).strip("\n"), "    "
    )
    sources[module] = replace_definition(sources[module], function, code) + HEADER
    return sources


def _line_of(source: str, text: str) -> int:
    return next(n for n, line in enumerate(source.splitlines(), 1) if text in line)


def test_every_library_twin_has_a_rule_or_a_reason():
    """The exercises whose computation a library also offers (a "library twin")."""
    twins = {"encode", "decode", "train_bpe", "lookup", "attention", "layer_norm", "gelu"}
    twins |= {"cross_entropy", "lm_loss", "adamw_step"}
    covered = {rule.function for _, rule in RULES}
    reasons = {function for lesson in MANIFEST.lessons for function in lesson.no_rule}
    assert twins - covered - reasons == set()
    assert set(TWINS) == covered  # every rule's twins are tried below


@pytest.mark.parametrize(
    ("function", "number"),
    [(function, number) for function, bodies in TWINS.items() for number in range(len(bodies))],
)
def test_every_library_twin_its_source_names_is_flagged_with_its_line(function, number):
    body = TWINS[function][number]
    sources = _solutions_with(function, body)
    found = _evidence(sources, function)
    assert found, body
    first = textwrap.dedent(body).strip().splitlines()[0]
    assert (found[0].file, found[0].function) == (f"{_module(function)}.py", function), found
    assert found[0].line == _line_of(sources[_module(function)], first), found
    assert str(found[0]).startswith(f"{_module(function)}.py, line {found[0].line}: {function}")


def test_a_twin_reached_through_a_class_attribute_is_flagged_in_the_class():
    body = "return _Lib.norm(x, x.shape[-1:], weight, bias, eps)"
    sources = _solutions_with("layer_norm", body)
    sources["block"] += "\nclass _Lib:\n    norm = F.layer_norm\n"
    (found,) = _evidence(sources, "layer_norm")
    assert "torch.nn.functional.layer_norm" in found.reason and "in _Lib" in found.reason


# Correct by-hand versions the allowlist must accept: any elementwise, reduction and shape
# operation, addcmul, rsqrt, var_mean and einsum among them.
BY_HAND = {
    "layer_norm": [
        """
        var = x.var(-1, keepdim=True, unbiased=False)
        normed = (x - x.mean(-1, keepdim=True)) * torch.rsqrt(var + eps)
        return normed * weight if bias is None else torch.addcmul(bias, normed, weight)
        """,
        """
        var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
        out = (x - mean) * (var + eps).rsqrt() * weight
        return out if bias is None else out + bias
        """,
        """
        rows = x.reshape(-1, x.shape[-1])
        mean = torch.einsum("nc->n", rows)[:, None] / rows.shape[-1]
        var = ((rows - mean) ** 2).mean(-1, keepdim=True)
        out = ((rows - mean) / (var + eps).sqrt()).view(x.shape) * weight
        return out if bias is None else out.add_(bias)
        """,
    ],
    "gelu": [
        """
        c = math.sqrt(2 / math.pi)
        cubic = torch.addcmul(x, x.pow(3), torch.full_like(x, 0.044715))
        return x.mul(0.5).mul(1 + torch.tanh(c * cubic))
        """,
    ],
    "cross_entropy": [
        """
        keep = targets != ignore_index
        rows = logits[keep]
        m = rows.amax(-1, keepdim=True)
        lse = m[:, 0] + (rows - m).exp().sum(-1).log()
        picked = torch.take_along_dim(rows, targets[keep][:, None], -1)[:, 0]
        return (lse - picked).sum() / keep.sum()
        """,
    ],
    "adamw_step": [
        """
        step = state.get("step", 0) + 1
        b1, b2 = betas
        out, ms, vs = [], [], []
        for i, (p, g) in enumerate(zip(params, grads)):
            m = state["exp_avg"][i] if state else torch.zeros_like(p)
            v = state["exp_avg_sq"][i] if state else torch.zeros_like(p)
            m = torch.lerp(m, g, 1 - b1)
            v = v.mul(b2).addcmul_(g, g, value=1 - b2)
            denom = (v / (1 - b2**step)).sqrt().add_(eps)
            p = p.mul(1 - lr * weight_decay).addcdiv(m, denom, value=-lr / (1 - b1**step))
            out.append(p)
            ms.append(m)
            vs.append(v)
        return out, {"step": step, "exp_avg": ms, "exp_avg_sq": vs}
        """,
    ],
}


@pytest.mark.parametrize(
    ("function", "number"),
    [(function, number) for function, bodies in BY_HAND.items() for number in range(len(bodies))],
)
def test_correct_by_hand_versions_are_not_flagged(function, number):
    assert _evidence(_solutions_with(function, BY_HAND[function][number]), function) == []


def test_a_by_hand_helper_named_like_the_twin_is_the_students_own():
    """A module-level function of the student's, named logsumexp, is followed, not flagged;
    the same name bound to torch's is."""
    body = """
        keep = targets != ignore_index
        rows = logits[keep]
        return (logsumexp(rows) - rows[range(len(rows)), targets[keep]]).mean()
    """
    sources = _solutions_with("cross_entropy", body)
    sources["objective"] += textwrap.dedent(
        """
        def logsumexp(z):
            m = z.amax(-1)
            return m + (z - m[:, None]).exp().sum(-1).log()
        """
    )
    assert _evidence(sources, "cross_entropy") == []
    sources["objective"] += "\nlogsumexp = torch.logsumexp\n"
    assert "torch.logsumexp" in str(_evidence(sources, "cross_entropy"))


# Honest code that the old name matching refused: none of it is
# evidence against any function. Each is (module, the text added to its solution).
HONEST = {
    "gelu-constant-named-C": (
        "block",
        "_C = math.sqrt(2.0 / math.pi)\n\n"
        "def gelu(x):\n    return 0.5 * x * (1.0 + torch.tanh(_C * (x + 0.044715 * x**3)))\n",
    ),
    "main-block-compares-with-the-library": (
        "block",
        'if __name__ == "__main__":\n    x = torch.randn(2, 4)\n'
        "    w, b = torch.ones(4), torch.zeros(4)\n"
        "    assert torch.allclose(layer_norm(x, w, b), F.layer_norm(x, (4,), w, b))\n"
        "    assert torch.allclose(gelu(x), F.gelu(x, approximate='tanh'))\n",
    ),
    "main-block-compares-with-tiktoken": (
        "tokens",
        'if __name__ == "__main__":\n    import tiktoken\n\n'
        '    assert encode("hi there") == tiktoken.get_encoding("gpt2").encode("hi there")\n',
    ),
    "docstring-and-comment-name-the-twin": (
        "objective",
        "def cross_entropy(logits, targets, ignore_index=-100):\n"
        '    """Not F.cross_entropy, logsumexp or log_softmax: by hand."""\n'
        "    # torch.nn.functional.cross_entropy would do it in one line\n"
        "    keep = targets != ignore_index\n    rows = logits[keep]\n"
        "    peak = rows.amax(-1, keepdim=True)\n"
        "    lse = (peak + (rows - peak).exp().sum(-1, keepdim=True).log())[:, 0]\n"
        "    return (lse - rows[range(len(rows)), targets[keep]]).mean()\n",
    ),
    "p-data-in-adamw-step": (
        "training",
        "def adamw_step(params, grads, state, *, lr, betas=(0.9, 0.95), eps=1e-8,"
        " weight_decay=0.0):\n"
        "    out = [p.data.clone() for p in params]\n    return out, state\n",
    ),
    "gc-and-getattr-in-fit": (
        "training",
        "import gc\n\ndef _option(module, name):\n    return getattr(module, name)\n\n"
        "def _tidy():\n    gc.collect()\n",
    ),
    "a-variable-named-library": ("training", "library = {'adamw': 'by hand'}\n"),
    "sys-path-insert": (
        "training",
        "import os\nimport sys\n\nsys.path.insert(0, os.path.dirname(__file__))\n",
    ),
    "inspect-stack-in-an-error": (
        "training",
        "import inspect\n\ndef _caller():\n    return inspect.stack()[1].function\n",
    ),
    "module-getattr": (
        "training",
        "def __getattr__(name):\n"
        "    raise AttributeError(f'module training has no attribute {name}')\n",
    ),
    "importlib-metadata": (
        "tokens",
        "import importlib.metadata\n\nTORCH = importlib.metadata.version('torch')\n",
    ),
    "type-hint-names-torch-optim": (
        "training",
        "def adamw_step(params, grads, state, *, lr, betas=(0.9, 0.95), eps=1e-8,"
        " weight_decay=0.0, into: torch.optim.Optimizer | None = None) -> tuple:\n"
        "    return [p.clone() for p in params], state\n",
    ),
}


@pytest.mark.parametrize("label", sorted(HONEST))
def test_honest_code_is_no_evidence(label):
    module, text = HONEST[label]
    sources = _solutions()
    sources[module] += "\n" + text
    package = Package.of_sources(sources)
    for lesson in MANIFEST.lessons:
        assert package.review(lesson.module, lesson.rules) == [], (label, lesson.slug)


def test_a_match_counts_against_the_function_whose_code_reaches_it():
    """fit building an optimizer is fit's business: adamw_step is not flagged for it. A helper
    that adamw_step calls, in its module or another of the package, is: named as the holder."""
    sources = _solutions()
    sources["training"] += "\ndef _fit_with_library(model):\n    return torch.optim.AdamW(model)\n"
    assert _evidence(sources, "adamw_step") == []
    sources["training"] = replace_definition(
        sources["training"],
        "adamw_step",
        "def adamw_step(params, grads, state, **options):\n    return _update(params)\n",
    )
    sources["training"] += "\nfrom .helpers.steps import update as _update\n"
    sources["helpers.steps"] = (
        '"""Steps."""\nimport torch\n\n'
        "def update(params):\n    return torch.optim.AdamW(params).step()\n"
    )
    (found,) = _evidence(sources, "adamw_step")
    assert (found.file, found.line, found.function) == ("helpers/steps.py", 5, "adamw_step")
    assert "torch.optim.AdamW" in found.reason and "in update" in found.reason


def test_code_the_reading_cannot_follow_is_flagged_in_the_function():
    """exec under another name, a computed getattr of torch, a pickle's payload (routes
    past a reading of names), and a library function stored into an attribute or a
    subscript first: each is flagged on its own line."""
    body = """
        import pickle
        run = exec
        run("y = 1")
        f = getattr(torch, "layer" + "_norm")
        g = pickle.loads(b"payload")
        box = {}
        box["f"] = F.layer_norm
        x.norm_of = torch.layer_norm
        return f(x, x.shape[-1:], weight, bias, eps) + g
    """
    sources = _solutions_with("layer_norm", body)
    found = {flag.line: flag.reason for flag in _evidence(sources, "layer_norm")}
    expected = {
        "run = exec": "cannot follow (exec)",
        "f = getattr(torch": "looks a name of torch up",
        "g = pickle.loads": "cannot follow (pickle.loads)",
        'box["f"] = F.layer_norm': "uses torch.nn.functional.layer_norm",
        "x.norm_of = torch.layer_norm": "uses torch.layer_norm",
    }
    for text, reason in expected.items():
        assert reason in found.get(_line_of(sources["block"], text), ""), (text, found)


# Files Python's importer reads and the reading must read alike (both were once left out
# of the reading while the import read them, and their library twin kept every point).
def test_a_file_with_a_byte_order_mark_is_read():
    source = _solutions_with("adamw_step", "return torch.optim.AdamW(params, lr=lr), state")
    data = b"\xef\xbb\xbf" + source["training"].encode("utf-8")
    package = Package.of_sources({**source, "training": data})
    (found,) = package.evidence("training", _rule("adamw_step"))
    assert found.line == _line_of(source["training"], "torch.optim.AdamW(params")
    assert package.unreadable == {}


def test_a_file_with_a_latin_1_coding_line_is_read():
    text = (
        "# -*- coding: latin-1 -*-\n# caf\xe9\nimport torch.nn.functional as F\n\n"
        "def attention(q, k, v, mask=None):\n"
        "    return F.scaled_dot_product_attention(q, k, v)\n"
    )
    package = Package.of_sources({"attention": text.encode("latin-1")})
    (found,) = package.evidence("attention", _rule("attention"))
    assert "scaled_dot_product_attention" in found.reason and found.line == 6, found


# Files Python cannot import: the file, the line and the cause, in one line.
UNREADABLE = {
    "undecodable-byte": (b"import torch\nname = '\xe9'\n", 2, "byte 0xe9 is not utf-8"),
    "unknown-codec": (b"# coding: no-such-codec\nx = 1\n", 1, "unknown encoding"),
    "bom-and-another-coding": (b"\xef\xbb\xbf# coding: latin-1\nx = 1\n", 1, "encoding problem"),
    "syntax-error": (b"x = 1\ndef f(:\n    pass\n", 2, "SyntaxError"),
    "null-byte": (b"x = 1\0\n", 1, "null bytes"),
    "nested-too-deeply": (b"x = " + b"-" * 100_000 + b"1\n", 1, "MemoryError"),
    "recursion": (b"x = " + b"+".join([b"a"] * 200_000) + b"\n", 1, "RecursionError"),
}


@pytest.mark.parametrize("label", sorted(UNREADABLE))
def test_a_file_python_cannot_parse_is_named_with_its_line_and_cause(label):
    data, line, cause = UNREADABLE[label]
    sources = {**_solutions(), "helpers": data}
    sources["embeddings"] = "from . import helpers\n" + sources["embeddings"]
    package = Package.of_sources(sources)
    found = package.cannot_import("embeddings")
    assert found is not None and (found.file, found.line) == ("helpers.py", line), found
    assert cause in found.reason and "\n" not in str(found), found
    assert str(found).startswith(f"helpers.py, line {line}: ")
    assert package.review("embeddings", ()) == []  # the import error says it, once
    assert package.cannot_import("attention") is None  # a lesson that does not import it


def test_a_file_over_the_limit_is_left_out_and_said_so(tmp_path):
    target = build_target(tmp_path)
    (target / "big.py").write_text("x = 1\n" * (MAX_FILE_BYTES // 6 + 1))
    embeddings = target / "embeddings.py"
    embeddings.write_text("from . import big\n" + embeddings.read_text())
    package = Package.read(target)
    assert package.cannot_import("embeddings") is None  # Python imports it: the reading doesn't
    (found,) = package.review("embeddings", ())
    assert (
        found.file == "big.py"
        and "not read" in found.reason
        and str(MAX_FILE_BYTES) in found.reason
    )


def test_the_files_read_in_all_are_bounded(monkeypatch):
    import graders.rules

    sources = _solutions()
    monkeypatch.setattr(graders.rules, "MAX_PACKAGE_BYTES", len(sources["block"].encode()) + 10)
    package = Package.of_sources(sources)
    assert package.module("block") is not None and package.module("attention") is None
    assert "not read" in package.unfollowed["attention"].reason
    assert package.cannot_import("attention") is None  # Python may import it: not its fault


def _chain(names: int) -> str:
    """A module whose by-hand function uses the last of ``names`` module-level names, each
    defined from the one before (32 KB of it took the old reading 89 s)."""
    lines = ["import torch", "n0 = torch.zeros(1)"]
    lines += [f"n{i} = n{i - 1} + 1" for i in range(1, names)]
    lines += [
        "def cross_entropy(logits, targets, ignore_index=-100):",
        f"    return n{names - 1}.sum() + torch.nn.functional.cross_entropy(logits, targets)",
    ]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("names", [3_000, 12_000])
def test_the_reading_of_a_long_chain_of_names_is_linear(names):
    """The work counted, not the time taken: every syntax node is visited at most twice (once
    to index its module, once when the function reaches it), so the work is linear."""
    source = _chain(names)
    assert len(source) > 32_000
    nodes = sum(1 for _ in ast.walk(ast.parse(source)))
    package = Package.of_sources({"objective": source})
    (found,) = package.evidence("objective", _rule("cross_entropy"))
    assert found.line == names + 3 and "torch.nn.functional.cross_entropy" in found.reason
    assert package.work <= 2 * nodes, (package.work, nodes)


def test_build_target_is_what_the_reading_reads(tmp_path):
    target = build_target(tmp_path)
    (target / "objective.py").write_text(
        textwrap.dedent(
            """
            import torch
            def cross_entropy(logits, targets, ignore_index=-100):
                return torch.nn.functional.cross_entropy(logits, targets)
            """
        )
    )
    (found,) = Package.read(target).evidence("objective", _rule("cross_entropy"))
    assert (found.file, found.line) == ("objective.py", 4), found
