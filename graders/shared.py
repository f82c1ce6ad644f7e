"""The tensors of a call's inputs in memory the checker maps itself.

Whether a call changed its inputs in place is the checker's finding: each tensor among the
inputs is written to one file that the checker makes (an anonymous, sealed memory file on
Linux), the lesson process maps it and hands the student's function tensors over that memory,
and after the call the checker reads the file back through its own mapping. What the student's
process reports of its inputs cannot hide a change; a file of fixed size cannot grow into
memory that no cap counts.
"""

from __future__ import annotations

import mmap
import os
import tempfile
from typing import Any

import torch
from torch import Tensor

from .worker.protocol import DTYPES, SHARED

PAGE = mmap.ALLOCATIONGRANULARITY  # each tensor starts on a page of its own


def _shareable(value: Any) -> bool:
    return (
        type(value) is Tensor
        and value.layout == torch.strided
        and value.device.type == "cpu"
        and value.is_contiguous()
        and value.numel() > 0
        and str(value.dtype).removeprefix("torch.") in DTYPES
    )


class SharedTensors:
    """``inputs`` as sent (``sent``: each tensor a ``{SHARED: slot}``), the slots' ``table``
    (``[offset, dtype, shape, requires_grad]``) and the file's descriptor (``fds``), for the
    ``with`` block; ``changed()`` says whether any tensor's bytes differ from what was sent."""

    def __init__(self, inputs: Any) -> None:
        self.slots: dict[int, int] = {}  # id of a tensor -> its slot
        self.tensors: list[Tensor] = []
        self.table: list[list] = []
        self.sent = self._mark(inputs)
        self.size = 0
        self.offsets = []
        for tensor in self.tensors:
            self.offsets.append(self.size)
            self.size += -(-tensor.numel() * tensor.element_size() // PAGE) * PAGE
        self.fds: tuple[int, ...] = ()
        self.file: Any = None

    def _mark(self, value: Any) -> Any:
        if _shareable(value):
            slot = self.slots.setdefault(id(value), len(self.tensors))
            if slot == len(self.tensors):
                self.tensors.append(value)
            return {SHARED: slot}
        if type(value) is list or type(value) is tuple:
            return type(value)(self._mark(item) for item in value)
        if type(value) is dict:
            return {key: self._mark(item) for key, item in value.items()}
        return value

    def __enter__(self) -> SharedTensors:
        if not self.tensors:
            return self
        if hasattr(os, "memfd_create"):
            fd = os.memfd_create("grader-inputs", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        else:  # not Linux: a temporary file serves
            fd = os.dup(tempfile.TemporaryFile().fileno())
        os.ftruncate(fd, self.size)
        self._seal(fd)
        self.file = mmap.mmap(fd, self.size)
        self.fds = (fd,)
        for tensor, offset in zip(self.tensors, self.offsets, strict=True):
            self._view(offset, tensor).copy_(tensor.detach())
            dtype = str(tensor.dtype).removeprefix("torch.")
            self.table.append([offset, dtype, list(tensor.shape), tensor.requires_grad])
        return self

    @staticmethod
    def _seal(fd: int) -> None:
        """No growing or shrinking the file (where the platform can seal one)."""
        try:
            import fcntl

            seals = fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
        except (ImportError, AttributeError, OSError):
            pass

    def _view(self, offset: int, like: Tensor) -> Tensor:
        count = like.numel()
        return torch.frombuffer(self.file, dtype=like.dtype, count=count, offset=offset).view(
            like.shape
        )

    def changed(self) -> bool:
        """Whether the call left any tensor's bytes other than they were sent (read here)."""
        for tensor, offset in zip(self.tensors, self.offsets, strict=True):
            now = self._view(offset, tensor).reshape(-1).view(torch.uint8)
            sent = tensor.detach().reshape(-1).view(torch.uint8)
            if not torch.equal(now, sent):
                return True
        return False

    def __exit__(self, *exc: object) -> None:
        if self.file is not None:
            self.file.close()
        for fd in self.fds:
            os.close(fd)
