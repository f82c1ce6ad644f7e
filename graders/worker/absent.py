"""Libraries the lesson process does without: the tokenizer libraries, whose functions are the
tokens lesson's exercises.

``encode``, ``decode`` and ``train_bpe`` have twins in tiktoken (and in Hugging Face's
tokenizers and transformers, and sentencepiece). No reading of names can tell every way of
reaching them from honest code (a tokenizer that finds GPT-2's ranks file through
``importlib.metadata`` is correct), so instead they are absent where the student's code runs:
importing one in the lesson process fails with one line saying so. The checker needs none of
them there: GPT-2's ranks are data (``gpt.vocab.bpe_ranks()`` reads the ranks file itself,
without tiktoken), and the checker's own tiktoken runs in its own process. In the sandbox the
packages' folders are also masked with empty ones (graders/sandbox.py), so that code which
takes this finder out of ``sys.meta_path`` finds nothing either.
"""

from __future__ import annotations

import sys
from typing import Any

ABSENT = ("tiktoken", "tiktoken_ext", "tokenizers", "transformers", "sentencepiece")


class AbsentLibrary(ModuleNotFoundError):
    pass


class _Absent:
    """A meta path finder that refuses ``ABSENT`` and their submodules."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        top = name.partition(".")[0]
        if top in ABSENT:
            raise AbsentLibrary(
                f"{top} is not available to the lesson's code: the tokens lesson's functions are "
                "written by hand, and GPT-2's merge ranks come from gpt.vocab.bpe_ranks()",
                name=name,
            )
        return None


def make_absent() -> None:
    """From now on, in this process, ``ABSENT`` cannot be imported (and what was is gone)."""
    for name in list(sys.modules):
        if name.partition(".")[0] in ABSENT:
            del sys.modules[name]
    sys.meta_path.insert(0, _Absent())
