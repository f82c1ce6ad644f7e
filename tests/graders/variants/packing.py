"""Planted variants of lesson 7, packing (solutions/packing.py): wrong ones, each
making the mistake it names, and correct ones written differently."""

from __future__ import annotations

from .base import V, Variant

WRONG: list[Variant] = [
    V(
        "packing",
        "pack",
        "no-eos",
        "no-eos",
        """
        def pack(docs, seq_len, eos_id):
            stream = [t for doc in docs for t in doc]
            owners = [i for i, doc in enumerate(docs) for _ in doc]
            n = len(stream) // seq_len
            return (torch.tensor(stream[: n * seq_len], dtype=torch.long).reshape(n, seq_len),
                    torch.tensor(owners[: n * seq_len], dtype=torch.long).reshape(n, seq_len))
    """,
    ),
    V(
        "packing",
        "pack",
        "padded",
        "padded-last-row",
        """
        def pack(docs, seq_len, eos_id):
            stream = [t for doc in docs for t in doc + [eos_id]]
            owners = [i for i, doc in enumerate(docs) for _ in doc + [eos_id]]
            while len(stream) % seq_len:
                stream.append(eos_id)
                owners.append(owners[-1])
            n = len(stream) // seq_len
            return (torch.tensor(stream, dtype=torch.long).reshape(n, seq_len),
                    torch.tensor(owners, dtype=torch.long).reshape(n, seq_len))
    """,
    ),
    V(
        "packing",
        "pack",
        "eos-next-doc",
        "eos-next-doc",
        """
        def pack(docs, seq_len, eos_id):
            stream = [t for doc in docs for t in doc + [eos_id]]
            owners = [i + (j == len(d)) for i, d in enumerate(docs) for j in range(len(d) + 1)]
            n = len(stream) // seq_len
            return (torch.tensor(stream[: n * seq_len], dtype=torch.long).reshape(n, seq_len),
                    torch.tensor(owners[: n * seq_len], dtype=torch.long).reshape(n, seq_len))
    """,
    ),
    V(
        "packing",
        "pack",
        "eos-first",
        "eos-first",
        """
        def pack(docs, seq_len, eos_id):
            stream, owners = [], []
            for index, doc in enumerate(docs):
                stream += [eos_id] + list(doc)
                owners += [index] * (len(doc) + 1)
            n = len(stream) // seq_len
            ids = torch.tensor(stream[: n * seq_len], dtype=torch.long).reshape(n, seq_len)
            return ids, torch.tensor(owners[: n * seq_len], dtype=torch.long).reshape(n, seq_len)
    """,
    ),
    V(
        "packing",
        "pack",
        "row-per-doc",
        "row-per-doc",
        """
        def pack(docs, seq_len, eos_id):
            rows, owners = [], []
            for index, doc in enumerate(docs):
                rows.append((list(doc) + [eos_id] * seq_len)[:seq_len])
                owners.append([index] * seq_len)
            return torch.tensor(rows, dtype=torch.long), torch.tensor(owners, dtype=torch.long)
    """,
    ),
    V(
        "packing",
        "pack",
        "no-last-eos",
        "no-last-eos",
        """
        def pack(docs, seq_len, eos_id):
            stream, owners = [], []
            for index, doc in enumerate(docs):
                tail = [eos_id] if index < len(docs) - 1 else []
                stream += list(doc) + tail
                owners += [index] * (len(doc) + len(tail))
            n = len(stream) // seq_len
            ids = torch.tensor(stream[: n * seq_len], dtype=torch.long).reshape(n, seq_len)
            return ids, torch.tensor(owners[: n * seq_len], dtype=torch.long).reshape(n, seq_len)
    """,
    ),
    V(
        "packing",
        "document_mask",
        "causal-only",
        "causal-only",
        """
        def document_mask(doc_ids):
            B, T = doc_ids.shape
            return torch.ones(T, T, dtype=torch.bool).tril().expand(B, T, T).clone()
    """,
    ),
    V(
        "packing",
        "document_mask",
        "not-causal",
        "not-causal",
        """
        def document_mask(doc_ids):
            return doc_ids.unsqueeze(-1) == doc_ids.unsqueeze(-2)
    """,
    ),
    V(
        "packing",
        "document_mask",
        "inverted",
        "inverted",
        """
        def document_mask(doc_ids):
            T = doc_ids.shape[-1]
            same_doc = doc_ids.unsqueeze(-1) == doc_ids.unsqueeze(-2)
            return ~(same_doc & torch.ones(T, T, dtype=torch.bool).tril())
    """,
    ),
    V(
        "packing",
        "position_ids",
        "not-reset",
        "not-reset",
        """
        def position_ids(doc_ids):
            return torch.arange(doc_ids.shape[1]).expand_as(doc_ids).clone()
    """,
    ),
    V(
        "packing",
        "position_ids",
        "row-continues",
        "row-continues",
        """
        def position_ids(doc_ids):
            flat = doc_ids.flatten().tolist()
            out, count = [], 0
            for t, doc in enumerate(flat):
                count = count + 1 if t and doc == flat[t - 1] else 0
                out.append(count)
            return torch.tensor(out).reshape(doc_ids.shape)
    """,
    ),
    V(
        "packing",
        "position_ids",
        "starts-at-one",
        "starts-at-one",
        """
        def position_ids(doc_ids):
            B, T = doc_ids.shape
            index = torch.arange(T).expand(B, T)
            starts = torch.ones_like(doc_ids, dtype=torch.bool)
            starts[:, 1:] = doc_ids[:, 1:] != doc_ids[:, :-1]
            run_start = torch.where(starts, index, torch.zeros_like(index)).cummax(dim=-1).values
            return index - run_start + 1
    """,
    ),
    V(
        "packing",
        "packed_targets",
        "crosses",
        "crosses-documents",
        """
        def packed_targets(input_ids, doc_ids, ignore_index=-100):
            targets = torch.full_like(input_ids, ignore_index)
            targets[:, :-1] = input_ids[:, 1:]
            return targets
    """,
    ),
    V(
        "packing",
        "packed_targets",
        "wraps",
        "wraps",
        """
        def packed_targets(input_ids, doc_ids, ignore_index=-100):
            same = torch.roll(doc_ids, -1, dims=1) == doc_ids
            return torch.roll(input_ids, -1, dims=1).masked_fill(~same, ignore_index)
    """,
    ),
    V(
        "packing",
        "packed_targets",
        "hard-coded-ignore",
        "hard-coded-ignore",
        """
        def packed_targets(input_ids, doc_ids, ignore_index=-100):
            targets = torch.full_like(input_ids, -100)
            same_doc = doc_ids[:, 1:] == doc_ids[:, :-1]
            targets[:, :-1] = input_ids[:, 1:].masked_fill(~same_doc, -100)
            return targets
    """,
    ),
    V(
        "packing",
        "packed_targets",
        "not-shifted",
        "not-shifted",
        """
        def packed_targets(input_ids, doc_ids, ignore_index=-100):
            return input_ids.clone()
    """,
    ),
]

RIGHT: list[Variant] = [
    V(
        "packing",
        "pack",
        "flat-then-view",
        None,
        """
        def pack(docs, seq_len, eos_id):
            import itertools
            stream = list(itertools.chain.from_iterable(d + [eos_id] for d in docs))
            owner = list(itertools.chain.from_iterable([i] * (len(d) + 1)
                                                       for i, d in enumerate(docs)))
            n = len(stream) // seq_len
            ids = torch.tensor(stream, dtype=torch.long)[: n * seq_len].view(n, seq_len)
            doc_ids = torch.tensor(owner, dtype=torch.long)[: n * seq_len].view(n, seq_len)
            return ids, doc_ids
    """,
    ),
    V(
        "packing",
        "document_mask",
        "loops",
        None,
        """
        def document_mask(doc_ids):
            B, T = doc_ids.shape
            mask = torch.zeros(B, T, T, dtype=torch.bool)
            for b in range(B):
                for i in range(T):
                    for j in range(i + 1):
                        mask[b, i, j] = bool(doc_ids[b, i] == doc_ids[b, j])
            return mask
    """,
    ),
    V(
        "packing",
        "position_ids",
        "loops",
        None,
        """
        def position_ids(doc_ids):
            out = torch.zeros_like(doc_ids)
            for b in range(doc_ids.shape[0]):
                for t in range(1, doc_ids.shape[1]):
                    if doc_ids[b, t] == doc_ids[b, t - 1]:
                        out[b, t] = out[b, t - 1] + 1
            return out
    """,
    ),
    V(
        "packing",
        "packed_targets",
        "where",
        None,
        """
        def packed_targets(input_ids, doc_ids, ignore_index=-100):
            nxt = torch.cat([input_ids[:, 1:], input_ids[:, :1]], dim=1)
            same = torch.cat([doc_ids[:, 1:] == doc_ids[:, :-1],
                              torch.zeros_like(doc_ids[:, :1], dtype=torch.bool)], dim=1)
            return torch.where(same, nxt, torch.full_like(nxt, ignore_index))
    """,
    ),
]
