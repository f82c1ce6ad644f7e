"""GPT-2's byte-pair vocabulary, without network access.

tiktoken's ``get_encoding("gpt2")`` downloads its vocabulary on first use. The sdist of
``VOCAB_PACKAGE`` (openai-whisper) ships the same 50,256 merge ranks as
``whisper/assets/gpt2.tiktoken``; we locate that file through package metadata (importing
``whisper`` would pull in numba and triton) and build an identical ``tiktoken.Encoding``.
"""

from __future__ import annotations

import base64
import functools
import importlib.metadata
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where an Encoding is made: the graders' lesson process has none
    import tiktoken

# GPT-2's pre-tokenization pattern: contractions, letters, numbers, punctuation, whitespace.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
EOT_ID = 50256
EOT_TEXT = "<|endoftext|>"
VOCAB_SIZE = 50257

RANKS_ENV = "GPT2_TIKTOKEN"  # path to a gpt2.tiktoken file, overrides the search below
# The package that ships the ranks, pinned here only: the noxfile installs it (reading this
# line without importing gpt), the release's requirements.txt and the error messages name it.
# Its own dependencies (numba, triton, ...) are not needed, hence --no-deps.
VOCAB_PACKAGE = "openai-whisper==20250625"
VOCAB_INSTALL = f"pip install --no-deps {VOCAB_PACKAGE}"


class VocabularyNotFound(RuntimeError):
    """Raised when GPT-2's merge ranks are nowhere to be found."""


def _whisper_asset() -> Path | None:
    try:
        dist = importlib.metadata.distribution(VOCAB_PACKAGE.partition("==")[0])
    except importlib.metadata.PackageNotFoundError:
        return None
    path = Path(str(dist.locate_file("whisper/assets/gpt2.tiktoken")))
    return path if path.is_file() else None


def ranks_path() -> Path | None:
    """Where GPT-2's merge ranks live on this machine, or None."""
    override = os.environ.get(RANKS_ENV)
    if override:
        path = Path(override)
        if not path.is_file():
            raise VocabularyNotFound(
                f"{RANKS_ENV}={override} is not a file; point it at gpt2.tiktoken"
            )
        return path
    return _whisper_asset()


def _read_ranks(path: Path) -> dict[bytes, int]:
    ranks = {}
    for line in path.read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


@functools.cache
def bpe_ranks() -> dict[bytes, int]:
    """GPT-2's 50,256 byte sequences and their merge ranks (rank = token id)."""
    path = ranks_path()
    if path is not None:
        return _read_ranks(path)
    return dict(_online_encoding()._mergeable_ranks)


def _online_encoding() -> tiktoken.Encoding:
    import tiktoken

    try:
        return tiktoken.get_encoding("gpt2")
    except Exception as error:  # tiktoken raises plain requests/OS errors offline
        raise VocabularyNotFound(
            "GPT-2's vocabulary is not installed and could not be downloaded. Install it with "
            f"`{VOCAB_INSTALL}`, or set "
            f"{RANKS_ENV}=/path/to/gpt2.tiktoken."
        ) from error


@functools.cache
def gpt2_encoding() -> tiktoken.Encoding:
    """A tiktoken Encoding identical to GPT-2's, built offline when possible."""
    if ranks_path() is None:
        return _online_encoding()
    import tiktoken

    return tiktoken.Encoding(
        name="gpt2",
        pat_str=GPT2_PATTERN,
        mergeable_ranks=bpe_ranks(),
        special_tokens={EOT_TEXT: EOT_ID},
        explicit_n_vocab=VOCAB_SIZE,
    )


@functools.cache
def id_to_bytes() -> list[bytes]:
    """The bytes of every token id; id 50256 is the text ``<|endoftext|>``."""
    table = [b""] * VOCAB_SIZE
    for token, rank in bpe_ranks().items():
        table[rank] = token
    table[EOT_ID] = EOT_TEXT.encode()
    return table
