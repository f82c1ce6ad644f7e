"""The block lesson's module as a student hands it in: the reference, or an honest one that
reaches lessons 2 and 4 by other names, beside the other lessons' modules as released (stubs).
The block lesson calls lesson 4's attention and causal_mask and lesson 2's lookup and
add_positions; graded on its own code, either gets every point wherever it is graded."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def reference() -> str:
    return (ROOT / "solutions" / "block.py").read_text(encoding="utf-8")


def honest() -> str:
    """The reference, but lesson 4's module imported as a module and attention called with its
    mask as a keyword, the other names imported under names of its own, and q, k, v made
    with ``@`` and chunk (other rounding than F.linear's)."""
    text = reference()
    edits = {
        "from .attention import attention, causal_mask\n": (
            "from . import attention as lesson4\nfrom .attention import causal_mask as tril\n"
        ),
        "from .embeddings import add_positions, lookup\n": (
            "from .embeddings import add_positions as place, lookup as look\n"
        ),
        'qkv = F.linear(x, params["c_attn.weight"], params.get("c_attn.bias"))': (
            'bias = params.get("c_attn.bias")\n'
            '    qkv = x @ params["c_attn.weight"].t() + (0 if bias is None else bias)'
        ),
        "for part in qkv.split(C, dim=-1))": "for part in qkv.chunk(3, dim=-1))",
        "mask = causal_mask(T).to(x.device)": "mask = tril(T).to(x.device)",
        "merge_heads(attention(q, k, v, mask))": (
            "merge_heads(lesson4.attention(q, k, v, mask=mask))"
        ),
        'x = lookup(params["transformer.wte.weight"], ids)': (
            'x = look(params["transformer.wte.weight"], ids)'
        ),
        'x = add_positions(x, params["transformer.wpe.weight"])': (
            'x = place(x, params["transformer.wpe.weight"])'
        ),
        "mask = causal_mask(ids.shape[1])": "mask = tril(ids.shape[1])",
    }
    for old, new in edits.items():
        if old not in text:
            raise AssertionError(f"solutions/block.py no longer holds {old!r}: update honest()")
        text = text.replace(old, new)
    return text


def package(folder: Path, module: str, stubs: Path | None = None) -> Path:
    """``folder``: the released stubs (exercises/, or ``stubs``) with ``module`` as block.py."""
    shutil.copytree(
        stubs or ROOT / "exercises", folder, ignore=shutil.ignore_patterns("__pycache__")
    )
    (folder / "block.py").write_text(module, encoding="utf-8")
    return folder
