"""Planted variants of lesson 3, windows (solutions/windows.py): wrong ones, each
making the mistake it names, and correct ones written differently."""

from __future__ import annotations

from .base import V, Variant

WRONG: list[Variant] = [
    V(
        "windows",
        "shift",
        "swapped",
        "swapped",
        """
        def shift(ids):
            return ids[..., 1:], ids[..., :-1]
    """,
    ),
    V(
        "windows",
        "shift",
        "first-dim",
        "first-dim",
        """
        def shift(ids):
            return ids[:-1], ids[1:]
    """,
    ),
    V(
        "windows",
        "shift",
        "not-shifted",
        "not-shifted",
        """
        def shift(ids):
            return ids[..., :-1], ids[..., :-1]
    """,
    ),
    V(
        "windows",
        "shift",
        "by-two",
        "by-two",
        """
        def shift(ids):
            return ids[..., :-2], ids[..., 2:]
    """,
    ),
    V(
        "windows",
        "window_starts",
        "no-target-room",
        "no-target-room",
        """
        def window_starts(n_tokens, context_length, stride):
            return list(range(0, n_tokens - context_length + 1, stride))
    """,
    ),
    V(
        "windows",
        "window_starts",
        "misses-last",
        "misses-last",
        """
        def window_starts(n_tokens, context_length, stride):
            return list(range(0, n_tokens - context_length - 1, stride))
    """,
    ),
    V(
        "windows",
        "window_starts",
        "range-object",
        "not-plain",
        """
        def window_starts(n_tokens, context_length, stride):
            return range(0, max(n_tokens - context_length, 0), stride)
    """,
    ),
    V(
        "windows",
        "window_starts",
        "ignores-stride",
        "ignores-stride",
        """
        def window_starts(n_tokens, context_length, stride):
            return list(range(0, n_tokens - context_length, context_length))
    """,
    ),
    V(
        "windows",
        "TokenWindows.__getitem__",
        "y-equals-x",
        "y-not-shifted",
        """
        def __getitem__(self, i):
            start = self.starts[i]
            window = self.ids[start : start + self.context_length]
            return window, window
    """,
    ),
    V(
        "windows",
        "TokenWindows.__len__",
        "len-plus-one",
        "len-too-long",
        """
        def __len__(self):
            return len(self.ids) - self.context_length
    """,
    ),
    V(
        "windows",
        "TokenWindows.__init__",
        "list-kept",
        "list-kept",
        """
        def __init__(self, ids, context_length, stride):
            self.ids = ids
            self.context_length = context_length
            self.starts = window_starts(len(ids), context_length, stride)
    """,
    ),
    V(
        "windows",
        "TokenWindows.__getitem__",
        "ignores-stride",
        "ignores-stride",
        """
        def __getitem__(self, i):
            start = i * self.context_length
            return shift(self.ids[start : start + self.context_length + 1])
    """,
    ),
    V(
        "windows",
        "TokenWindows.__getitem__",
        "context-length-window",
        "wrong-length",
        """
        def __getitem__(self, i):
            start = self.starts[i]
            return shift(self.ids[start : start + self.context_length])
    """,
    ),
    V(
        "windows",
        "make_loader",
        "global-seed",
        "global-seed",
        """
        def make_loader(ids, batch_size, context_length, stride, shuffle=True, drop_last=True,
                        seed=None):
            if seed is not None:
                torch.manual_seed(seed)
            return DataLoader(TokenWindows(ids, context_length, stride), batch_size=batch_size,
                              shuffle=shuffle, drop_last=drop_last)
    """,
    ),
    V(
        "windows",
        "make_loader",
        "drop-last-ignored",
        "drop-last-ignored",
        """
        def make_loader(ids, batch_size, context_length, stride, shuffle=True, drop_last=True,
                        seed=None):
            generator = torch.Generator().manual_seed(seed) if seed is not None else None
            return DataLoader(TokenWindows(ids, context_length, stride), batch_size=batch_size,
                              shuffle=shuffle, drop_last=True, generator=generator)
    """,
    ),
    V(
        "windows",
        "make_loader",
        "shuffle-ignored",
        "shuffle-ignored",
        """
        def make_loader(ids, batch_size, context_length, stride, shuffle=True, drop_last=True,
                        seed=None):
            generator = torch.Generator().manual_seed(seed) if seed is not None else None
            return DataLoader(TokenWindows(ids, context_length, stride), batch_size=batch_size,
                              shuffle=True, drop_last=drop_last, generator=generator)
    """,
    ),
    V(
        "windows",
        "make_loader",
        "generator-only-when-shuffling",
        "generator-only-when-shuffling",
        """
        def make_loader(ids, batch_size, context_length, stride, shuffle=True, drop_last=True,
                        seed=None):
            generator = None
            if shuffle and seed is not None:
                generator = torch.Generator().manual_seed(seed)
            return DataLoader(TokenWindows(ids, context_length, stride), batch_size=batch_size,
                              shuffle=shuffle, drop_last=drop_last, generator=generator)
    """,
    ),
    V(
        "windows",
        "make_loader",
        "never-shuffles",
        "not-shuffled",
        """
        def make_loader(ids, batch_size, context_length, stride, shuffle=True, drop_last=True,
                        seed=None):
            generator = torch.Generator().manual_seed(seed) if seed is not None else None
            return DataLoader(TokenWindows(ids, context_length, stride), batch_size=batch_size,
                              shuffle=False, drop_last=drop_last, generator=generator)
    """,
    ),
]

RIGHT: list[Variant] = [
    V(
        "windows",
        "shift",
        "narrow",
        None,
        """
        def shift(ids):
            T = ids.shape[-1]
            return ids.narrow(-1, 0, T - 1), ids.narrow(-1, 1, T - 1)
    """,
    ),
    V(
        "windows",
        "window_starts",
        "while-loop",
        None,
        """
        def window_starts(n_tokens, context_length, stride):
            starts, s = [], 0
            while s + context_length + 1 <= n_tokens:
                starts.append(s)
                s += stride
            return starts
    """,
    ),
    V(
        "windows",
        "TokenWindows",
        "lazy",
        None,
        """
        class TokenWindows(Dataset):
            def __init__(self, ids, context_length, stride):
                self.ids = torch.tensor(list(ids), dtype=torch.long)
                self.c, self.s = context_length, stride

            def __len__(self):
                n = len(self.ids) - self.c - 1
                return 0 if n < 0 else n // self.s + 1

            def __getitem__(self, i):
                window = self.ids[i * self.s : i * self.s + self.c + 1]
                return window[:-1].clone(), window[1:].clone()
    """,
    ),
    V(
        "windows",
        "make_loader",
        "options-dict",
        None,
        """
        def make_loader(ids, batch_size, context_length, stride, shuffle=True, drop_last=True,
                        seed=None):
            options = {"shuffle": shuffle, "drop_last": drop_last}
            if seed is not None:
                generator = torch.Generator()
                generator.manual_seed(seed)
                options["generator"] = generator
            return DataLoader(TokenWindows(ids, context_length, stride), batch_size, **options)
    """,
    ),
]
