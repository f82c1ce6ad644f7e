"""The checker's reading of the submitted package (graders/rules.py), on its own: no worker.

It refuses, with file and line, code anywhere in the package that reaches the grader or hides
what it calls; it refuses every library twin of a by-hand exercise, and in an allowlist rule's
function any torch operation that is not elementwise, reduction or shape; and it accepts the
solutions, the untouched exercises and every correct variant (no false accusation).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from variants import RIGHT, build_target, replace_definition

from core.manifest import load_manifest
from graders.rules import Package, breach

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = load_manifest()
RULES = [(lesson.module, rule) for lesson in MANIFEST.lessons for rule in lesson.rules]


def _rule(function: str):
    return next(rule for _, rule in RULES if rule.function == function)


def _module(function: str) -> str:
    return next(module for module, rule in RULES if rule.function == function)


@pytest.mark.parametrize("folder", ["solutions", "exercises"])
def test_the_course_own_code_breaks_no_rule(folder):
    package = Package.read(ROOT / folder)
    assert package.hiding is None, package.hiding
    broken = {rule.function: package.breach(module, rule) for module, rule in RULES}
    assert not any(broken.values()), {k: str(v) for k, v in broken.items() if v}


def test_every_correct_variant_breaks_no_rule(tmp_path):
    """The chapters' correct variants, each in its own copy of solutions/, read as written."""
    for number, variant in enumerate(RIGHT):
        target = build_target(tmp_path / str(number), [variant])
        package = Package.read(target)
        for module, rule in RULES:
            found = package.breach(module, rule) if module == variant.module else None
            assert found is None, f"{variant.id}: {found}"


# One line of a helper module, anywhere in the package, that reaches the grader or hides what
# it calls; the reading names the file and the line.
HIDING = {
    "sys-modules": "import sys\nworker = sys.modules['grader']\n",
    "sys-renamed": "import sys as s\nmods = s.modules\n",
    "sys-imported-from": "from sys import modules\n",
    "sys-as-a-value": "import sys\nbox = [sys]\n",
    "frame": "import sys\nf = sys._getframe(1)\n",
    "frame-inspect": "import inspect\nf = inspect.currentframe()\n",
    "frame-traceback": "try:\n    1 / 0\nexcept Exception as e:\n    f = e.__traceback__\n",
    "gc": "import gc\nobjects = gc.get_objects()\n",
    "profile-hook": "import sys\nsys.setprofile(None)\n",
    "trace-hook": "import sys\nsys.settrace(None)\n",
    "ctypes": "import ctypes\n",
    "importlib": "import importlib\nm = importlib.import_module('graders')\n",
    "dunder-import": "m = __import__('graders')\n",
    "computed-getattr": "import torch\nname = 'layer' + '_norm'\nf = getattr(torch, name)\n",
    "computed-setattr": "import torch\ndef patch(name, value):\n    setattr(torch, name, value)\n",
    "eval": "f = eval('print')\n",
    "tensor-subclass": "import torch\nclass Sneaky(torch.Tensor):\n    pass\n",
    "tensor-subclass-by-name": "from torch import Tensor\nclass Sneaky(Tensor):\n    pass\n",
    "parameter-subclass": "from torch import nn\nclass Sneaky(nn.Parameter):\n    pass\n",
    "as-subclass": "import torch\ndef wrap(t, kind):\n    return t.as_subclass(kind)\n",
    "reduce": "class Box:\n    def __reduce__(self):\n        return (print, ())\n",
    "reduce-ex": "class Box:\n    def __reduce_ex__(self, protocol):\n        return (print, ())\n",
    "getstate": "class Box:\n    def __getstate__(self):\n        return {}\n",
    "torch-function": (
        "class Box:\n    @classmethod\n    def __torch_function__(cls, f, t, a=(), k=None):\n"
        "        return f(*a)\n"
    ),
    "torch-dispatch": (
        "class Box:\n    @classmethod\n    def __torch_dispatch__(cls, f, t, a=(), k=None):\n"
        "        return f(*a)\n"
    ),
    "reducer-assigned": "import torch\ntorch.Tensor.__reduce_ex__ = lambda self, p: (print, ())\n",
    "class-switched": "def switch(t, kind):\n    t.__class__ = kind\n",
    "class-switched-by-setattr": "def switch(t, kind):\n    setattr(t, '__class__', kind)\n",
    "class-made-at-run-time": "import torch\nSneaky = type('Sneaky', (torch.Tensor,), {})\n",
    "module-getattr": "def __getattr__(name):\n    return print\n",
    "copyreg": "import copyreg\n",
    "torch-library": "import torch\nlib = torch.library.Library('aten', 'IMPL')\n",
}


@pytest.mark.parametrize("label", sorted(HIDING))
def test_the_reading_refuses_what_reaches_the_grader_anywhere(label):
    source = "# a helper the graded function never calls\n" + HIDING[label]
    lines = source.splitlines()
    package = Package.of_sources({"block": "def gelu(x):\n    return x\n", "util.helpers": source})
    found = package.hiding
    assert found is not None, label
    assert found.file == "util/helpers.py" and 2 <= found.line <= len(lines), found
    # every rule of every lesson is broken by it, not only the lesson of the file
    assert str(
        breach({"block": "def gelu(x):\n    return x\n", "x": source}, "block", _rule("gelu"))
    )


# What correct code does and the reading must not mistake for hiding.
PLAIN = {
    "getattr-with-a-name": "def core(model):\n    return getattr(model, 'module', model)\n",
    "sys-streams": "import sys\ndef say(text):\n    sys.stderr.write(text)\n    sys.exit(0)\n",
    "a-module-subclass": "from torch import nn\nclass Net(nn.Module):\n    pass\n",
    "a-dataset": "from torch.utils.data import Dataset\nclass Rows(Dataset):\n    pass\n",
    "class-name-of-an-object": "def name(x):\n    return type(x).__name__\n",
    "class-read": "class Rows:\n    def __repr__(self):\n        return self.__class__.__name__\n",
    "docstring": '"""Never use sys.modules, gc or __reduce_ex__ here."""\n',
}


@pytest.mark.parametrize("label", sorted(PLAIN))
def test_the_reading_leaves_plain_code_alone(label):
    assert Package.of_sources({"helpers": PLAIN[label]}).hiding is None


# Each library twin, and what the rule's function may do by hand: function bodies, in a
# module that imports torch, F and math.
TWINS = {
    "layer_norm": [
        "return F.layer_norm(x, x.shape[-1:], weight, bias, eps)",
        "return torch.nn.LayerNorm(x.shape[-1])(x)",
        "return torch.layer_norm(x, x.shape[-1:], weight, bias, eps)",
        "return F.group_norm(x, 1, weight, bias, eps)",
        "return x.renorm(2, 0, 1.0)",
        "return (x - x.mean(-1, keepdim=True)) / x.norm(dim=-1, keepdim=True)",
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
        "return (logits.logcumsumexp(-1)[:, -1] - logits[range(len(targets)), targets]).mean()",
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


def _solutions_with(function: str, body: str) -> dict[str, str]:
    """The sources of solutions/ with ``function`` replaced by one whose body is ``body``."""
    sources = {
        path.stem: path.read_text(encoding="utf-8") for path in (ROOT / "solutions").glob("*.py")
    }
    module = _module(function)
    code = f"def {function}({SIGNATURES[function]}):\n" + textwrap.indent(
        textwrap.dedent(body).strip("\n"), "    "
    )
    sources[module] = replace_definition(sources[module], function, code) + HEADER
    return sources


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
def test_the_reading_refuses_every_library_twin(function, number):
    sources = _solutions_with(function, TWINS[function][number])
    found = breach(sources, _module(function), _rule(function))
    assert found is not None, TWINS[function][number]
    assert found.file == f"{_module(function)}.py" and found.line > 0, found


def test_a_twin_reached_through_a_class_attribute_is_refused():
    body = "return _Lib.norm(x, x.shape[-1:], weight, bias, eps)"
    sources = _solutions_with("layer_norm", body)
    sources["block"] += "\nclass _Lib:\n    norm = F.layer_norm\n"
    assert "layer_norm" in str(breach(sources, "block", _rule("layer_norm")))


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
def test_the_reading_accepts_correct_by_hand_versions(function, number):
    sources = _solutions_with(function, BY_HAND[function][number])
    assert breach(sources, _module(function), _rule(function)) is None


def test_a_by_hand_helper_named_like_the_twin_is_the_students_own():
    """A module-level function of the student's, named logsumexp, is followed, not refused."""
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
    assert breach(sources, "objective", _rule("cross_entropy")) is None
    sources["objective"] += "\nlogsumexp = torch.logsumexp\n"
    assert breach(sources, "objective", _rule("cross_entropy")) is not None


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
    found = Package.read(target).breach("objective", _rule("cross_entropy"))
    assert found is not None and (found.file, found.line) == ("objective.py", 4), found


# Graded end to end: a library twin keeps no point of its function, and the report flags it.
GRADED_TWINS = {
    "adamw_step": """
    params = [p.clone().requires_grad_(True) for p in params]
    opt = torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    for p, g in zip(params, grads, strict=True):
        p.grad = g.clone()
    opt.step()
    return [p.detach() for p in params], {"step": 1}
    """,
    "attention": TWINS["attention"][0],
}


@pytest.mark.slow
@pytest.mark.parametrize("function", sorted(GRADED_TWINS))
def test_a_graded_library_twin_loses_its_points_and_is_flagged(tmp_path, function):
    import graders

    sources = _solutions_with(function, GRADED_TWINS[function])
    target = build_target(tmp_path)
    module = _module(function)
    (target / f"{module}.py").write_text(sources[module])
    report = graders.grade(
        target, lessons=[module], hidden=True, functions=[function], json_path=tmp_path / "r.json"
    )
    lesson = report["lessons"][0]
    checks = [c for c in lesson["checks"] if c["function"] == function]
    assert checks and not any(c["passed"] for c in checks), [c["id"] for c in checks]
    assert all(c["hint"] == _rule(function).message for c in checks)
    assert [(e["function"], e["file"]) for e in lesson["flagged"]] == [(function, f"{module}.py")]
