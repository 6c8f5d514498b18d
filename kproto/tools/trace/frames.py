"""Sans-IO framing of a Kafka byte stream: size-prefixed frames out of arbitrary chunks.

Owns :class:`FrameSplitter`. Bytes go in as the socket delivered them; whole frames (size
prefix included, so they can be forwarded as they came) come out. Frames that lie wholly in
one chunk are zero-copy ``memoryview`` slices of it; only a frame split across chunks is
assembled in a buffer. A size prefix that cannot be a Kafka frame (negative, or larger than
``max_frame_bytes``) means the stream is not Kafka framing at all (garbage, or TLS spoken to
a plaintext port): from then on every byte is passed through as a raw chunk, so the proxy
stays transparent and reports the stream once instead of crashing or buffering without end.
"""

from __future__ import annotations

import struct

__all__ = ["FrameSplitter", "DEFAULT_MAX_FRAME_BYTES"]

_SIZE = struct.Struct(">i")
# Kafka's socket.request.max.bytes is 100 MiB; responses (Fetch) stay under fetch.max.bytes.
DEFAULT_MAX_FRAME_BYTES = 128 * 1024 * 1024


class FrameSplitter:
    """Feed chunks, get ``(framed, view)`` pieces: whole frames, or raw bytes once broken."""

    __slots__ = ("max_frame_bytes", "_pending", "broken")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._pending = bytearray()
        # Why the stream stopped being framed (None while it is framed).
        self.broken: str | None = None

    @property
    def buffered(self) -> int:
        """Bytes held back waiting for the rest of a frame."""
        return len(self._pending)

    def feed(self, data: bytes) -> list[tuple[bool, memoryview]]:
        if self.broken is not None:
            return [(False, memoryview(data))] if data else []
        if self._pending:
            self._pending += data
            if len(self._pending) >= 4:
                (size,) = _SIZE.unpack_from(self._pending, 0)
                if 0 <= size <= self.max_frame_bytes and len(self._pending) < 4 + size:
                    return []  # a big frame still arriving: no copy per chunk
            # The buffer is mutated later: frames taken from it must be copies.
            source = memoryview(bytes(self._pending))
            self._pending = bytearray()
        else:
            source = memoryview(data)
        out: list[tuple[bool, memoryview]] = []
        pos, end = 0, len(source)
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(source, pos)
            if size < 0 or size > self.max_frame_bytes:
                self.broken = "size prefix {} at a frame boundary is not a Kafka frame".format(size)
                out.append((False, source[pos:]))
                return out
            if end - pos < 4 + size:
                break
            out.append((True, source[pos:pos + 4 + size]))
            pos += 4 + size
        if pos < end:
            self._pending += source[pos:]
        return out
