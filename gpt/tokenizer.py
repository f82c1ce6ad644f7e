"""A byte-pair tokenizer whose merges a lesson learned: ``tokens.train_bpe`` on the corpus.

``--tokenizer lesson`` trains the merges on the run's own corpus with the lessons'
``train_bpe`` and encodes with the lessons' ``split_pieces`` and ``bpe_merge``; GPT-2's
tokenizer (tiktoken) is not involved. The merge ranks are saved in the run's folder, in
tiktoken's file format (a base64 token and its rank per line), written atomically, and read
back when the run resumes, so a resumed run tokenizes exactly as it started.

``LessonTokenizer`` has the two methods of ``tiktoken.Encoding`` that training uses,
``encode_ordinary`` and ``decode``, so the training code treats both tokenizers alike.
"""

from __future__ import annotations

import base64
import types
from pathlib import Path
from typing import Protocol

from core.atomic import atomic_write_bytes

VOCAB_FILE = "vocab.tiktoken"


class VocabularyError(ValueError):
    """Merge ranks that cannot serve as a vocabulary; the message names the problem and fix."""


def check_ranks(ranks: object, source: str) -> dict[bytes, int]:
    """``ranks`` if they are bytes -> rank with every byte and ranks 0 ... n - 1, each once."""
    if not isinstance(ranks, dict) or not all(
        isinstance(k, bytes) and isinstance(v, int) and not isinstance(v, bool)
        for k, v in ranks.items()
    ):
        raise VocabularyError(f"{source} is not a dict of bytes -> int; fix train_bpe")
    if sorted(ranks.values()) != list(range(len(ranks))):
        raise VocabularyError(
            f"{source}: the ranks are not 0 ... {len(ranks) - 1}, each once; fix train_bpe"
        )
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        raise VocabularyError(
            f"{source} has no rank for {len(missing)} single bytes (first: {missing[0]}); "
            "every byte needs one, or some texts cannot be encoded: fix train_bpe"
        )
    return ranks


def save_ranks(path: Path, ranks: dict[bytes, int]) -> None:
    """Write ``ranks`` to ``path`` in tiktoken's format, atomically."""
    lines = (base64.b64encode(token) + b" %d\n" % rank for token, rank in ranks.items())
    atomic_write_bytes(path, b"".join(lines))


def load_ranks(path: Path) -> dict[bytes, int]:
    """The ranks saved at ``path``; ``VocabularyError`` if the file is damaged."""
    ranks: dict[bytes, int] = {}
    try:
        for line in Path(path).read_bytes().splitlines():
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
    except (OSError, ValueError) as error:
        raise VocabularyError(
            f"{path} is not a saved vocabulary ({type(error).__name__}); delete it to train "
            "the merges again, or start over with --fresh"
        ) from None
    return check_ranks(ranks, str(path))


class Encoding(Protocol):
    """What training needs of a tokenizer: ``tiktoken.Encoding`` and ``LessonTokenizer``."""

    @property
    def n_vocab(self) -> int: ...  # read-only: tiktoken's is a property

    def encode_ordinary(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


class LessonTokenizer:
    """Encode with the lessons' ``split_pieces`` and ``bpe_merge`` and learned ``ranks``."""

    def __init__(self, ranks: dict[bytes, int], tokens: types.ModuleType) -> None:
        self.ranks = ranks
        self.tokens = tokens
        self.n_vocab = len(ranks)
        self._bytes = [b""] * len(ranks)
        for token, rank in ranks.items():
            self._bytes[rank] = token
        self._cache: dict[str, list[int]] = {}  # piece -> ids: text repeats its words

    def encode_ordinary(self, text: str) -> list[int]:
        ids: list[int] = []
        for piece in self.tokens.split_pieces(text):
            if piece not in self._cache:
                self._cache[piece] = self.tokens.bpe_merge(piece.encode("utf-8"), self.ranks)
            ids.extend(self._cache[piece])
        return ids

    def decode(self, ids: list[int]) -> str:
        return b"".join(self._bytes[i] for i in ids).decode("utf-8", errors="replace")


def lesson_tokenizer(
    text: str, vocab_size: int, tokens: types.ModuleType, folder: Path, reuse: bool, save: bool
) -> LessonTokenizer:
    """The run's tokenizer: the ranks saved in ``folder`` when ``reuse`` (a resumed run) and
    they are there, else new ones from ``tokens.train_bpe(text, vocab_size)``, saved there
    when ``save`` (in a distributed run, the main process writes the file)."""
    path = Path(folder) / VOCAB_FILE
    if reuse and path.exists():
        return LessonTokenizer(load_ranks(path), tokens)
    ranks = check_ranks(tokens.train_bpe(text, vocab_size), "train_bpe's result")
    if save:
        save_ranks(path, ranks)
    return LessonTokenizer(ranks, tokens)
