"""Length-prefixed frames over a pair of pipes, with a size cap and a deadline on every read and
write (SPEC §13): the isolated grader and its sandboxed policy process talk only this way.

A frame is a 4-byte big-endian length and that many bytes. The reader checks the length
against its cap *before* reading the body, so a peer cannot make it buffer more than the cap;
every read and every write waits at most until its deadline (``poll`` on non-blocking file
descriptors), so a peer that stops reading or writing cannot wedge the other side. What the
bytes mean is the caller's business: the grader sends pickles (its own data, to a process that
trusts it) and reads only JSON (it never unpickles what the policy's process wrote).

Kept free of heavy imports (NumPy only): the policy's process loads it before anything else.

:func:`pack` / :func:`unpack` carry NumPy arrays in requests as one bytes object each (a dict
of them, an observation, as one bytes object and its layout): pickling a dozen small arrays
one by one cost more than the decision it carries.
"""

from __future__ import annotations

import math
import os
import select
import struct
import time
from typing import Any

import numpy as np

HEADER = struct.Struct(">I")


class FrameError(Exception):
    """The peer broke the protocol: ``kind`` says how (``"timeout"``, ``"closed"``,
    ``"oversized"``)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


class Channel:
    """One end of the protocol: frames are read from ``read_fd`` and written to ``write_fd``
    (both made non-blocking), frames read are at most ``max_read`` bytes."""

    def __init__(self, read_fd: int, write_fd: int, max_read: int) -> None:
        self.read_fd, self.write_fd, self.max_read = read_fd, write_fd, max_read
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)

    def send(self, payload: bytes, timeout: float) -> None:
        """Write one frame within ``timeout`` seconds, or raise :class:`FrameError`."""
        view = memoryview(HEADER.pack(len(payload)) + payload)
        deadline = time.monotonic() + timeout
        while view:
            try:
                written = os.write(self.write_fd, view)
            except BlockingIOError:
                written = 0
            except (BrokenPipeError, ConnectionResetError, OSError) as error:
                raise FrameError("closed", f"the peer closed its end ({error.__class__.__name__})") from None
            view = view[written:]
            if view:
                _wait(self.write_fd, deadline, write=True)

    def receive(self, timeout: float) -> bytes:
        """Read one frame within ``timeout`` seconds (its length checked before its body)."""
        deadline = time.monotonic() + timeout
        (length,) = HEADER.unpack(self._read(HEADER.size, deadline))
        if length > self.max_read:
            raise FrameError("oversized", f"a frame of {length} bytes (at most {self.max_read})")
        return self._read(length, deadline)

    def _read(self, n: int, deadline: float) -> bytes:
        chunks, left = [], n
        while left:
            try:
                chunk = os.read(self.read_fd, min(left, 1 << 20))
            except BlockingIOError:
                _wait(self.read_fd, deadline, write=False)
                continue
            except OSError as error:
                raise FrameError("closed", f"the peer closed its end ({error.__class__.__name__})") from None
            if not chunk:
                raise FrameError("closed", "the peer closed its end")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)


def _wait(fd: int, deadline: float, write: bool) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise FrameError("timeout", "no answer in time")
    poller = select.poll()
    poller.register(fd, select.POLLOUT if write else select.POLLIN)
    if not poller.poll(left * 1000.0):
        raise FrameError("timeout", "no answer in time")


def pack(value: Any) -> Any:
    """An array, or a dict of arrays, as plain bytes and its layout; anything else as it is."""
    if type(value) is np.ndarray and not value.dtype.hasobject:
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if (
        type(value) is dict
        and value
        and all(type(v) is np.ndarray and not v.dtype.hasobject for v in value.values())
    ):
        layout = tuple((k, v.dtype.str, v.shape) for k, v in value.items())
        return ("arrays", layout, b"".join(v.tobytes() for v in value.values()))
    return ("value", value)


def unpack(packed: Any) -> Any:
    """What :func:`pack` packed: writable arrays, as the grader's own."""
    if packed[0] == "value":
        return packed[1]
    if packed[0] == "array":
        _, dtype, shape, data = packed
        return np.frombuffer(bytearray(data), dtype).reshape(shape)
    _, layout, data = packed
    data, out, at = bytearray(data), {}, 0
    for key, dtype, shape in layout:
        dtype = np.dtype(dtype)
        count = math.prod(shape)
        out[key] = np.frombuffer(data, dtype, count, at).reshape(shape)
        at += count * dtype.itemsize
    return out


__all__ = ["Channel", "FrameError", "pack", "unpack"]
