"""Compression codecs of Kafka record batches: gzip, snappy, lz4 and zstd.

Owns ``compress(codec_id, data)`` and ``decompress(codec_id, data, *, max_size)`` and the
codec ids (the low three bits of a batch's attributes). gzip uses the standard library;
snappy, lz4 and zstd use optional packages that are imported on first use only, so
``import kproto`` stays standard-library only. A missing package raises
``UnsupportedCodecError`` naming the pip extra that installs it.

Every decompressor is bounded: output beyond ``max_size`` bytes raises
``CorruptMessageError`` after at most ``max_size + 1`` bytes (zstd: ``max_size`` plus one
128 KiB block) were produced, so a decompression bomb cannot exhaust memory.

Wire formats (what Kafka's Java producer writes, see Kafka's ``compress`` package):

* gzip: a gzip member (RFC 1952); several concatenated members are accepted.
* snappy: either a raw snappy block, or the *xerial* framing of snappy-java
  (``\\x82SNAPPY\\x00``, two int32 version fields, then blocks each prefixed by an int32
  length). The Java producer writes xerial; librdkafka writes raw for v2 and xerial for
  legacy sets; both are read.
* lz4: the LZ4 frame format. For magic 0 message sets Kafka computed the frame header
  checksum over the wrong bytes (KAFKA-3160); ``legacy_lz4=True`` writes that broken
  checksum and reading always tolerates it.
* zstd: a zstd frame, possibly without the content-size field (streaming).
"""

from __future__ import annotations

import logging
import struct
import threading
import zlib
from typing import Any

from kproto.errors import CorruptMessageError, UnsupportedCodecError

__all__ = [
    "NONE", "GZIP", "SNAPPY", "LZ4", "ZSTD", "CODEC_NAMES", "DEFAULT_MAX_SIZE",
    "compress", "decompress", "is_available",
]

log = logging.getLogger("kproto.codecs")

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
# Optional codec -> (module to import, pip extra that installs it).
_OPTIONAL = {SNAPPY: ("snappy", "kproto[snappy]"), LZ4: ("lz4.frame", "kproto[lz4]"),
             ZSTD: ("zstandard", "kproto[zstd]")}

# Default bound of one batch's decompressed size. Kafka itself has no fixed limit; this is
# generous for real batches (a broker's default message.max.bytes is ~1 MiB compressed).
DEFAULT_MAX_SIZE = 256 * 1024 * 1024

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size
_LZ4_MAGIC = b"\x04\x22\x4d\x18"

_modules: dict[int, Any] = {}


def _module(codec: int) -> Any:
    """The optional package of ``codec``, imported on first use."""
    mod = _modules.get(codec)
    if mod is None:
        name, extra = _OPTIONAL[codec]
        try:
            import importlib
            mod = importlib.import_module(name)
        except ImportError as exc:
            raise UnsupportedCodecError(
                "{} compression needs the {!r} package: pip install {}".format(
                    CODEC_NAMES[codec], name.split(".")[0], extra)) from exc
        _modules[codec] = mod
    return mod


def is_available(codec: int) -> bool:
    """Whether ``codec`` can be used here (its optional package is installed)."""
    if codec in (NONE, GZIP):
        return True
    try:
        _module(codec)
    except UnsupportedCodecError:
        return False
    return True


def _check_codec(codec: int) -> None:
    if codec not in CODEC_NAMES:
        raise UnsupportedCodecError("unknown compression codec id {}".format(codec))


def _too_big(codec: int, max_size: int) -> CorruptMessageError:
    return CorruptMessageError("{} data decompresses to more than {} bytes".format(
        CODEC_NAMES[codec], max_size))


# --- gzip ----------------------------------------------------------------------------

def _gzip_decompress(data: bytes, max_size: int) -> bytes:
    out = []
    total = 0
    while True:
        d = zlib.decompressobj(wbits=47)  # 32+15: gzip or zlib header, detected
        chunk = d.decompress(data, max_size + 1 - total)
        total += len(chunk)
        out.append(chunk)
        if total > max_size:
            raise _too_big(GZIP, max_size)
        if not d.eof:
            raise CorruptMessageError("truncated gzip data")
        data = d.unused_data
        # Concatenated members, as GZIPInputStream reads them; trailing zero padding ends.
        if not data or not data.strip(b"\x00"):
            return b"".join(out)


# --- snappy --------------------------------------------------------------------------

def _snappy_raw_length(data: bytes) -> int:
    """The uncompressed length a raw snappy block declares (its varint prefix)."""
    n = shift = 0
    for i in range(min(5, len(data))):
        b = data[i]
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n
        shift += 7
    raise CorruptMessageError("bad snappy length prefix")


def _snappy_block(snappy: Any, block: bytes, room: int, max_size: int) -> bytes:
    """One raw block; ``room`` is what is left of ``max_size``."""
    if _snappy_raw_length(block) > room:
        raise _too_big(SNAPPY, max_size)
    try:
        return snappy.uncompress(block)
    except snappy.UncompressError as exc:
        raise CorruptMessageError("invalid snappy data") from exc


def _snappy_decompress(data: bytes, max_size: int) -> bytes:
    snappy = _module(SNAPPY)
    if not data.startswith(_XERIAL_MAGIC):
        return _snappy_block(snappy, data, max_size, max_size)
    pos = 16  # magic + int32 version + int32 minimum compatible version
    out = []
    total = 0
    end = len(data)
    while pos < end:
        if pos + 4 > end:
            raise CorruptMessageError("truncated xerial snappy block length")
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise CorruptMessageError("bad xerial snappy block length {}".format(size))
        block = _snappy_block(snappy, data[pos:pos + size], max_size - total,
                              max_size)
        total += len(block)
        out.append(block)
        pos += size
    return b"".join(out)


def _snappy_compress(data: bytes, xerial: bool) -> bytes:
    snappy = _module(SNAPPY)
    if not xerial:
        return snappy.compress(data)
    parts = [_XERIAL_MAGIC, struct.pack(">ii", 1, 1)]
    for i in range(0, len(data), _XERIAL_BLOCK):
        block = snappy.compress(data[i:i + _XERIAL_BLOCK])
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


# --- lz4 -----------------------------------------------------------------------------

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32_short(data: bytes, seed: int = 0) -> int:
    """XXH32 of an input shorter than 16 bytes (an LZ4 frame descriptor is 2–14 bytes)."""
    if len(data) >= 16:
        raise ValueError("xxh32_short handles inputs below 16 bytes")
    h = (seed + _P5 + len(data)) & _M32
    pos = 0
    while pos + 4 <= len(data):
        (w,) = struct.unpack_from("<I", data, pos)
        h = (_rotl((h + w * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    for b in data[pos:]:
        h = (_rotl((h + b * _P5) & _M32, 11) * _P1) & _M32
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


def _lz4_descriptor_end(data: bytes) -> int:
    """Index of the header-checksum byte of an LZ4 frame."""
    if len(data) < 7 or data[:4] != _LZ4_MAGIC:
        raise CorruptMessageError("not an LZ4 frame")
    flg = data[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(data) <= end:
        raise CorruptMessageError("truncated LZ4 frame header")
    return end


def _lz4_fix_header(data: bytes, broken: bool) -> bytes:
    """Rewrite the header checksum: the correct one, or Kafka 0.8's (over magic too)."""
    end = _lz4_descriptor_end(data)
    start = 0 if broken else 4
    hc = (xxh32_short(data[start:end]) >> 8) & 0xFF
    if data[end] == hc:
        return data
    return data[:end] + bytes((hc,)) + data[end + 1:]


def _lz4_decompress(data: bytes, max_size: int) -> bytes:
    frame = _module(LZ4)
    try:
        return _lz4_bounded(frame, data, max_size)
    except RuntimeError as exc:
        if "headerChecksum" not in str(exc):
            raise CorruptMessageError("invalid lz4 data: {}".format(exc)) from exc
    # A legacy (magic 0) frame with Kafka 0.8's header checksum: put the right one in and
    # try again (only then, so normal frames skip the Python xxh32).
    try:
        return _lz4_bounded(frame, _lz4_fix_header(data, broken=False), max_size)
    except RuntimeError as exc2:
        raise CorruptMessageError("invalid lz4 data: {}".format(exc2)) from exc2


# First output bound of an lz4 call. python-lz4 allocates ``max_length`` bytes up front,
# so asking for max_size + 1 at once costs a 256 MiB allocation per batch (~10x the
# decompression of a 16 KiB batch); start near the likely size and grow.
_LZ4_FIRST_STEP = 1 << 20


def _lz4_bounded(frame: Any, data: bytes, max_size: int) -> bytes:
    """Decompress one LZ4 frame producing at most ``max_size + 1`` bytes."""
    d = frame.LZ4FrameDecompressor()
    limit = max_size + 1
    out = d.decompress(data, max_length=min(limit, max(_LZ4_FIRST_STEP, 8 * len(data))))
    total = len(out)
    if not d.eof and not d.needs_input and total < limit:
        # The output bound was reached with more to come: continue, doubling the bound.
        parts = [out]
        while not d.eof and not d.needs_input and total < limit:
            piece = d.decompress(b"", max_length=min(limit - total, total))
            if not piece:
                break
            parts.append(piece)
            total += len(piece)
        out = b"".join(parts)
    if total > max_size:
        raise _too_big(LZ4, max_size)
    if not d.eof:
        raise CorruptMessageError("truncated lz4 data")
    return out


def _lz4_compress(data: bytes, legacy: bool) -> bytes:
    frame = _module(LZ4)
    # Kafka's Java reader (KafkaLZ4BlockInputStream) needs independent blocks and, for the
    # legacy format, no content size; 64 KiB blocks as Kafka writes them.
    out = frame.compress(data, block_size=frame.BLOCKSIZE_MAX64KB, block_linked=False,
                         content_checksum=False, store_size=not legacy)
    if legacy:
        out = _lz4_fix_header(out, broken=True)
    return out


# --- zstd ----------------------------------------------------------------------------

# Most output one input byte of zstd can yield: a 4-byte RLE block decodes to 128 KiB.
_ZSTD_MAX_RATIO_SHIFT = 15
_zstd_local = threading.local()


def _zstd_decompress(data: bytes, max_size: int) -> bytes:
    """Frames with or without a content size (Java and librdkafka stream them), one or
    several in a row. The input is fed in pieces no larger than the room left divided by
    zstd's largest expansion, so the output stays within ``max_size`` plus one block
    whatever the data; a decompressobj (no output bound of its own) is ~5x faster here
    than the size-bounded readers, which allocate their whole bound per call."""
    zstd = _module(ZSTD)
    if not data:
        raise CorruptMessageError("empty zstd data")
    # A decompression context per thread (creating one costs as much as decompressing a
    # small batch; one context must not serve two threads at once).
    dctx = getattr(_zstd_local, "dctx", None)
    if dctx is None:
        dctx = _zstd_local.dctx = zstd.ZstdDecompressor()
    view = memoryview(data)
    end = len(data)
    out = []
    total = 0
    pos = 0
    try:
        size = zstd.get_frame_parameters(data).content_size
        if 0 < size <= max_size and size != zstd.CONTENTSIZE_UNKNOWN:
            # The frame declares a size within bounds: one exact-size call (the fastest).
            return dctx.decompress(data)
        obj = dctx.decompressobj()
        while pos < end:
            step = max(4, (max_size - total) >> _ZSTD_MAX_RATIO_SHIFT)
            piece = obj.decompress(view[pos:pos + step])
            pos += step
            if piece:
                total += len(piece)
                out.append(piece)
                if total > max_size:
                    raise _too_big(ZSTD, max_size)
            if obj.eof:
                # The frame ended inside this piece: the next one starts after it.
                pos = min(pos, end) - len(obj.unused_data)
                if pos < end:
                    obj = dctx.decompressobj()
        if not obj.eof:
            raise CorruptMessageError("truncated zstd data")
    except zstd.ZstdError as exc:
        raise CorruptMessageError("invalid zstd data: {}".format(exc)) from exc
    return out[0] if len(out) == 1 else b"".join(out)


# --- dispatch ------------------------------------------------------------------------

def decompress(codec: int, data: bytes | bytearray | memoryview, *,
               max_size: int = DEFAULT_MAX_SIZE) -> bytes:
    """Decompress ``data`` written with ``codec``; more than ``max_size`` bytes raises."""
    _check_codec(codec)
    data = bytes(data)
    if codec == NONE:
        if len(data) > max_size:
            raise _too_big(codec, max_size)
        return data
    if codec == GZIP:
        try:
            return _gzip_decompress(data, max_size)
        except zlib.error as exc:
            raise CorruptMessageError("invalid gzip data: {}".format(exc)) from exc
    if codec == SNAPPY:
        return _snappy_decompress(data, max_size)
    if codec == LZ4:
        return _lz4_decompress(data, max_size)
    return _zstd_decompress(data, max_size)


def compress(codec: int, data: bytes | bytearray | memoryview, *, xerial: bool = True,
             legacy_lz4: bool = False, level: int | None = None) -> bytes:
    """Compress ``data`` with ``codec`` as a Kafka producer would.

    ``xerial``: frame snappy as snappy-java does (the Java producer's format);
    ``legacy_lz4``: write the broken header checksum of magic 0 message sets;
    ``level``: the codec's compression level (its default if None).
    """
    _check_codec(codec)
    data = bytes(data)
    if codec == NONE:
        return data
    if codec == GZIP:
        c = zlib.compressobj(-1 if level is None else level, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        return _snappy_compress(data, xerial)
    if codec == LZ4:
        return _lz4_compress(data, legacy_lz4)
    zstd = _module(ZSTD)
    return zstd.ZstdCompressor(level=3 if level is None else level).compress(data)
