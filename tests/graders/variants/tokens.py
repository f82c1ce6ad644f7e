"""Planted variants of lesson 1, tokens (solutions/tokens.py): wrong ones, each
making the mistake it names, and correct ones written differently."""

from __future__ import annotations

from .base import V, Variant, changed

# A plain train_bpe, every piece read on every round; the wrong variants below change one line.
TRAIN_BPE = """
    def train_bpe(text, vocab_size):
        if vocab_size < 256:
            raise ValueError("vocab_size must be at least 256")
        ranks = {bytes([b]): b for b in range(256)}
        words = [[bytes([b]) for b in piece.encode("utf-8")] for piece in split_pieces(text)]
        while len(ranks) < vocab_size:
            counts = {}
            for word in words:
                for pair in zip(word, word[1:]):
                    counts[pair] = counts.get(pair, 0) + 1
            if not counts:
                break
            best = max(counts, key=counts.get)
            joined = best[0] + best[1]
            ranks.setdefault(joined, len(ranks))
            new_words = []
            for word in words:
                out, i = [], 0
                while i < len(word):
                    if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                        out.append(joined)
                        i += 2
                    else:
                        out.append(word[i])
                        i += 1
                new_words.append(out)
            words = new_words
        return ranks
"""

WRONG: list[Variant] = [
    V(
        "tokens",
        "train_bpe",
        "distinct-pieces",
        "once-per-piece",
        changed(
            TRAIN_BPE,
            "for piece in split_pieces(text)]",
            "for piece in dict.fromkeys(split_pieces(text))]",
        ),
    ),
    V(
        "tokens",
        "train_bpe",
        "pair-set-per-piece",
        "once-per-piece",
        changed(
            TRAIN_BPE,
            "for pair in zip(word, word[1:]):",
            "for pair in dict.fromkeys(zip(word, word[1:])):",
        ),
    ),
    V(
        "tokens",
        "split_pieces",
        "str-split",
        "lost-text",
        """
        def split_pieces(text):
            return text.split()
    """,
    ),
    V(
        "tokens",
        "split_pieces",
        "space-apart",
        "space-apart",
        r"""
        def split_pieces(text):
            return regex.findall(r"\p{L}+|\p{N}+|[^\s\p{L}\p{N}]+|\s+", text)
    """,
    ),
    V(
        "tokens",
        "split_pieces",
        "no-contractions",
        "contractions",
        r"""
        def split_pieces(text):
            return regex.findall(r" ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+", text)
    """,
    ),
    V(
        "tokens",
        "split_pieces",
        "re-module",
        "re-module",
        """
        def split_pieces(text):
            import re
            return re.findall(GPT2_PATTERN, text)
    """,
    ),
    V(
        "tokens",
        "split_pieces",
        "ignore-case",
        "ignore-case",
        """
        def split_pieces(text):
            return regex.compile(GPT2_PATTERN, regex.IGNORECASE).findall(text)
    """,
    ),
    V(
        "tokens",
        "split_pieces",
        "trailing-space",
        "trailing-space",
        r"""
        def split_pieces(text):
            return regex.findall(
                r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+", text
            )
    """,
    ),
    V(
        "tokens",
        "bpe_merge",
        "first-pair",
        "first-pair",
        """
        def bpe_merge(piece, ranks):
            parts = [piece[i : i + 1] for i in range(len(piece))]
            merged = True
            while merged:
                merged = False
                for i in range(len(parts) - 1):
                    if parts[i] + parts[i + 1] in ranks:
                        parts[i : i + 2] = [parts[i] + parts[i + 1]]
                        merged = True
                        break
            return [ranks[p] for p in parts]
    """,
    ),
    V(
        "tokens",
        "bpe_merge",
        "rightmost-tie",
        "rightmost-tie",
        """
        def bpe_merge(piece, ranks):
            parts = [piece[i : i + 1] for i in range(len(piece))]
            while len(parts) > 1:
                best_rank, best_at = None, -1
                for i in range(len(parts) - 1):
                    rank = ranks.get(parts[i] + parts[i + 1])
                    if rank is not None and (best_rank is None or rank <= best_rank):
                        best_rank, best_at = rank, i
                if best_rank is None:
                    break
                parts[best_at : best_at + 2] = [parts[best_at] + parts[best_at + 1]]
            return [ranks[part] for part in parts]
    """,
    ),
    V(
        "tokens",
        "bpe_merge",
        "returns-parts",
        "returns-parts",
        """
        def bpe_merge(piece, ranks):
            parts = [piece[i : i + 1] for i in range(len(piece))]
            while len(parts) > 1:
                pairs = [(ranks[a + b], i) for i, (a, b) in enumerate(zip(parts, parts[1:]))
                         if a + b in ranks]
                if not pairs:
                    break
                _, i = min(pairs)
                parts[i : i + 2] = [parts[i] + parts[i + 1]]
            return parts
    """,
    ),
    V(
        "tokens",
        "bpe_merge",
        "one-pass",
        "one-pass",
        """
        def bpe_merge(piece, ranks):
            parts = [piece[i : i + 1] for i in range(len(piece))]
            i = 0
            while i < len(parts) - 1:
                if parts[i] + parts[i + 1] in ranks:
                    parts[i : i + 2] = [parts[i] + parts[i + 1]]
                i += 1
            return [ranks[p] for p in parts]
    """,
    ),
    V(
        "tokens",
        "encode",
        "no-split",
        "no-split",
        """
        def encode(text):
            return list(bpe_merge(text.encode("utf-8"), bpe_ranks())) if text else []
    """,
    ),
    V(
        "tokens",
        "encode",
        "special-token",
        "special-token",
        """
        def encode(text):
            ids = []
            for n, part in enumerate(text.split("<|endoftext|>")):
                if n:
                    ids.append(EOT_ID)
                for piece in split_pieces(part):
                    ids.extend(_encode_piece(piece))
            return ids
    """,
    ),
    V(
        "tokens",
        "encode",
        "latin-1",
        "check:encode-unicode",
        """
        def encode(text):
            ids = []
            for piece in split_pieces(text):
                ids.extend(bpe_merge(piece.encode("latin-1", errors="replace"), bpe_ranks()))
            return ids
    """,
    ),
    V(
        "tokens",
        "encode",
        "appends-eot",
        "appends-eot",
        """
        def encode(text):
            ids = []
            for piece in split_pieces(text):
                ids.extend(_encode_piece(piece))
            return ids + [EOT_ID]
    """,
    ),
    V(
        "tokens",
        "decode",
        "strict",
        "check:decode-partial-utf8",
        """
        def decode(ids):
            return b"".join(id_to_bytes()[i] for i in ids).decode("utf-8")
    """,
    ),
    V(
        "tokens",
        "decode",
        "per-token",
        "per-token",
        """
        def decode(ids):
            table = id_to_bytes()
            return "".join(table[i].decode("utf-8", errors="replace") for i in ids)
    """,
    ),
    V(
        "tokens",
        "decode",
        "no-endoftext",
        "check:decode-endoftext",
        """
        def decode(ids):
            table = {rank: token for token, rank in bpe_ranks().items()}
            return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")
    """,
    ),
    V(
        "tokens",
        "train_bpe",
        "across-pieces",
        "across-pieces",
        changed(TRAIN_BPE, "for piece in split_pieces(text)]", "for piece in [text]]"),
    ),
    V(
        "tokens",
        "train_bpe",
        "tie-last",
        "tie-last",
        changed(
            TRAIN_BPE,
            "best = max(counts, key=counts.get)",
            "best = max(reversed(list(counts)), key=counts.get)",
        ),
    ),
    V(
        "tokens",
        "train_bpe",
        "tie-greatest",
        "tie-greatest",
        changed(
            TRAIN_BPE,
            "best = max(counts, key=counts.get)",
            "best = max(counts, key=lambda pair: (counts[pair], pair))",
        ),
    ),
    V(
        "tokens",
        "train_bpe",
        "first-only",
        "first-only",
        changed(
            TRAIN_BPE,
            "if i + 1 < len(word) and (word[i], word[i + 1]) == best:",
            # no merge yet in this piece on this round: the output is as long as the input read
            "if i == len(out) and i + 1 < len(word) and (word[i], word[i + 1]) == best:",
        ),
    ),
    V(
        "tokens",
        "train_bpe",
        "one-too-many",
        "one-too-many",
        changed(TRAIN_BPE, "while len(ranks) < vocab_size:", "while len(ranks) <= vocab_size:"),
    ),
    V(
        "tokens",
        "train_bpe",
        "one-too-few",
        "one-too-few",
        changed(TRAIN_BPE, "while len(ranks) < vocab_size:", "while len(ranks) < vocab_size - 1:"),
    ),
    V(
        "tokens",
        "train_bpe",
        "no-validation",
        "no-validation",
        changed(TRAIN_BPE, "if vocab_size < 256:", "if vocab_size < 0:"),
    ),
    V(
        "tokens",
        "train_bpe",
        "runs-out",
        "runs-out",
        changed(TRAIN_BPE, "if not counts:", "if False:"),
    ),
    V(
        "tokens",
        "train_bpe",
        "characters",
        "characters",
        changed(
            TRAIN_BPE,
            '[bytes([b]) for b in piece.encode("utf-8")]',
            '[c.encode("utf-8") for c in piece]',
        ),
    ),
    V(
        "tokens",
        "train_bpe",
        "str-keys",
        "not-bytes",
        changed(
            TRAIN_BPE,
            "        return ranks\n",
            '        return {t.decode("latin-1"): rank for t, rank in ranks.items()}\n',
        ),
    ),
]

RIGHT: list[Variant] = [
    V(
        "tokens",
        "split_pieces",
        "finditer",
        None,
        """
        def split_pieces(text):
            return [m.group(0) for m in _PIECES.finditer(text)]
    """,
    ),
    V(
        "tokens",
        "bpe_merge",
        "min-with-key",
        None,
        """
        def bpe_merge(piece, ranks):
            parts = [bytes([b]) for b in piece]
            while True:
                candidates = [i for i in range(len(parts) - 1) if parts[i] + parts[i + 1] in ranks]
                if not candidates:
                    return [ranks[p] for p in parts]
                i = min(candidates, key=lambda j: (ranks[parts[j] + parts[j + 1]], j))
                parts = parts[:i] + [parts[i] + parts[i + 1]] + parts[i + 2 :]
    """,
    ),
    V(
        "tokens",
        "encode",
        "comprehension",
        None,
        """
        def encode(text):
            ranks = bpe_ranks()
            return [i for piece in split_pieces(text) for i in bpe_merge(piece.encode(), ranks)]
    """,
    ),
    V(
        "tokens",
        "decode",
        "bytearray",
        None,
        """
        def decode(ids):
            out = bytearray()
            for i in ids:
                out += id_to_bytes()[i]
            return out.decode(errors="replace")
    """,
    ),
    V(
        "tokens",
        "train_bpe",
        "every-piece-every-round",
        None,
        TRAIN_BPE,
    ),
    V(
        "tokens",
        "train_bpe",
        "regex-and-counter",
        None,
        r"""
        def train_bpe(text, vocab_size):
            if vocab_size < 256:
                raise ValueError(f"vocab_size={vocab_size} is below 256")
            ranks = {bytes([b]): b for b in range(256)}
            pieces = regex.findall(_PIECES, text)
            words = [list(map(lambda b: bytes([b]), w.encode())) for w in pieces]
            while len(ranks) < vocab_size:
                counts = collections.Counter(p for w in words for p in zip(w, w[1:]))
                if not counts:
                    return ranks
                (a, b), _ = counts.most_common(1)[0]
                ranks.setdefault(a + b, len(ranks))
                for w in words:
                    i = 0
                    while i < len(w) - 1:
                        if w[i] == a and w[i + 1] == b:
                            w[i : i + 2] = [a + b]
                        i += 1
            return ranks
    """,
    ),
]
