"""Planted variants of lesson 2, embeddings (solutions/embeddings.py): wrong ones, each
making the mistake it names, and correct ones written differently."""

from __future__ import annotations

from .base import V, Variant

WRONG: list[Variant] = [
    V(
        "embeddings",
        "lookup",
        "off-by-one",
        "off-by-one",
        """
        def lookup(table, ids):
            return table[ids - 1]
    """,
    ),
    V(
        "embeddings",
        "lookup",
        "flattened",
        "flattened",
        """
        def lookup(table, ids):
            return table.index_select(0, ids.flatten())
    """,
    ),
    V(
        "embeddings",
        "lookup",
        "detached",
        "detached",
        """
        def lookup(table, ids):
            return table[ids].detach()
    """,
    ),
    V(
        "embeddings",
        "lookup",
        "through-python",
        "detached",
        """
        def lookup(table, ids):
            return torch.tensor(table.tolist(), dtype=table.dtype)[ids]
    """,
    ),
    V(
        "embeddings",
        "lookup",
        "squeezed",
        "squeezed",
        """
        def lookup(table, ids):
            return table[ids].squeeze()
    """,
    ),
    V(
        "embeddings",
        "one_hot_lookup",
        "no-num-classes",
        "no-num-classes",
        """
        def one_hot_lookup(table, ids):
            return F.one_hot(ids).to(table.dtype) @ table
    """,
    ),
    V(
        "embeddings",
        "one_hot_lookup",
        "float32",
        "float32",
        """
        def one_hot_lookup(table, ids):
            return F.one_hot(ids, num_classes=table.shape[0]).float() @ table
    """,
    ),
    V(
        "embeddings",
        "one_hot_lookup",
        "detached",
        "detached",
        """
        def one_hot_lookup(table, ids):
            one_hot = F.one_hot(ids, num_classes=table.shape[0]).to(table.dtype)
            return (one_hot @ table).detach()
    """,
    ),
    V(
        "embeddings",
        "add_positions",
        "whole-table",
        "whole-table",
        """
        def add_positions(vectors, pos_table):
            if vectors.shape[1] > pos_table.shape[0]:
                raise ValueError(f"T={vectors.shape[1]} > L={pos_table.shape[0]}")
            return vectors + pos_table
    """,
    ),
    V(
        "embeddings",
        "add_positions",
        "raises-at-equal",
        "raises-at-equal",
        """
        def add_positions(vectors, pos_table):
            T, L = vectors.shape[1], pos_table.shape[0]
            if T >= L:
                raise ValueError(f"T={T} L={L}")
            return vectors + pos_table[:T]
    """,
    ),
    V(
        "embeddings",
        "add_positions",
        "no-numbers",
        "no-numbers",
        """
        def add_positions(vectors, pos_table):
            if vectors.shape[1] > pos_table.shape[0]:
                raise ValueError("the sequence is too long")
            return vectors + pos_table[: vectors.shape[1]]
    """,
    ),
    V(
        "embeddings",
        "add_positions",
        "index-error",
        "not-value-error",
        """
        def add_positions(vectors, pos_table):
            T = vectors.shape[1]
            return vectors + pos_table[torch.arange(T)]
    """,
    ),
    V(
        "embeddings",
        "add_positions",
        "in-place",
        "in-place",
        """
        def add_positions(vectors, pos_table):
            T, L = vectors.shape[1], pos_table.shape[0]
            if T > L:
                raise ValueError(f"T={T} > L={L}")
            vectors += pos_table[:T]
            return vectors
    """,
    ),
    V(
        "embeddings",
        "add_positions",
        "detached",
        "detached",
        """
        def add_positions(vectors, pos_table):
            T, L = vectors.shape[-2], pos_table.shape[0]
            if T > L:
                raise ValueError(f"sequence length T={T} exceeds the position table's L={L} rows")
            return vectors + pos_table[:T].detach()
    """,
    ),
    V(
        "embeddings",
        "add_positions",
        "last-rows",
        "wrong-rows",
        """
        def add_positions(vectors, pos_table):
            T, L = vectors.shape[-2], pos_table.shape[0]
            if T > L:
                raise ValueError(f"sequence length T={T} exceeds the position table's L={L} rows")
            return vectors + pos_table[L - T :]
    """,
    ),
    V(
        "embeddings",
        "nearest",
        "dot-product",
        "dot-product",
        """
        def nearest(table, index, k):
            sims = table @ table[index]
            sims[index] = -float("inf")
            values, rows = torch.topk(sims, k)
            return [(int(r), float(v)) for r, v in zip(rows, values)]
    """,
    ),
    V(
        "embeddings",
        "nearest",
        "includes-self",
        "includes-self",
        """
        def nearest(table, index, k):
            sims = F.cosine_similarity(table[index].unsqueeze(0), table, dim=-1)
            values, rows = torch.topk(sims, k)
            return [(int(r), float(v)) for r, v in zip(rows, values)]
    """,
    ),
    V(
        "embeddings",
        "nearest",
        "tensors",
        "tensors",
        """
        def nearest(table, index, k):
            sims = F.cosine_similarity(table[index].unsqueeze(0), table, dim=-1)
            sims[index] = -float("inf")
            values, rows = torch.topk(sims, k)
            return list(zip(rows, values))
    """,
    ),
    V(
        "embeddings",
        "nearest",
        "ascending",
        "ascending",
        """
        def nearest(table, index, k):
            sims = F.cosine_similarity(table[index].unsqueeze(0), table, dim=-1)
            order = [int(r) for r in sims.argsort() if int(r) != index]
            return [(r, float(sims[r])) for r in order[:k]]
    """,
    ),
]

RIGHT: list[Variant] = [
    V(
        "embeddings",
        "lookup",
        "f-embedding",
        None,
        """
        def lookup(table, ids):
            return F.embedding(ids, table)
    """,
    ),
    V(
        "embeddings",
        "one_hot_lookup",
        "eye",
        None,
        """
        def one_hot_lookup(table, ids):
            return torch.eye(table.shape[0], dtype=table.dtype)[ids] @ table
    """,
    ),
    V(
        "embeddings",
        "add_positions",
        "torch-add",
        None,
        """
        def add_positions(vectors, pos_table):
            B, T, C = vectors.shape
            L = pos_table.shape[0]
            if T > L:
                raise ValueError(f"{T} positions, but the table has {L}")
            return torch.add(vectors, pos_table.narrow(0, 0, T).unsqueeze(0))
    """,
    ),
    V(
        "embeddings",
        "nearest",
        "normalised-matmul",
        None,
        """
        def nearest(table, index, k):
            unit = table / table.norm(dim=-1, keepdim=True)
            sims = (unit @ unit[index]).tolist()
            order = sorted((r for r in range(len(sims)) if r != index), key=lambda r: -sims[r])
            return [(r, sims[r]) for r in order[:k]]
    """,
    ),
]
