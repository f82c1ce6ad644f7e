"""The frames both sides write: an 8-byte big-endian length, then the payload.

Torch-free, unlike the rest of what the two sides share (protocol.py): the checker starts the
worker and sends it its bundle (graders/launch.py) before the checker itself imports torch,
so that the two imports overlap.
"""

from __future__ import annotations

import os
import struct
from typing import Any

FRAME = struct.Struct(">Q")


def _read(fd: int, n: int) -> bytes | None:
    chunks, got = [], 0  # joined once: adding each chunk to the rest copies it all again
    while got < n:
        chunk = os.read(fd, n - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> bytes | None:
    header = _read(fd, FRAME.size)
    if header is None:
        return None
    return _read(fd, FRAME.unpack(header)[0])


def read_message(channel: Any) -> tuple[bytes | None, list[int]]:
    """A frame from the socket ``channel`` and the descriptors that came with it (the file of
    the tensors the checker shares, sent with a call's first byte)."""
    import socket

    header, fds = b"", []
    while len(header) < FRAME.size:
        data, got, _, _ = socket.recv_fds(channel, FRAME.size - len(header), 4)
        fds += got
        if not data:
            break
        header += data
    frame = _read(channel.fileno(), FRAME.unpack(header)[0]) if len(header) == FRAME.size else None
    if frame is None:
        for fd in fds:
            os.close(fd)
        return None, []
    return frame, fds


def write_frame(fd: int, payload: bytes) -> None:
    view = memoryview(FRAME.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view) :]
