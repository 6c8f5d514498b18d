"""kproto.codecs: round trips, the formats other producers write (kafka-python's codec
module as an independent writer/reader), bounded decompression and lazy imports."""

import os
import subprocess
import sys

import pytest

from kproto.codecs import GZIP, LZ4, NONE, SNAPPY, ZSTD, compress, decompress
from kproto.errors import CorruptMessageError, UnsupportedCodecError

ALL = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
PAYLOADS = [b"", b"x", os.urandom(3000), b"kafka " * 20_000, os.urandom(70_000) + bytes(70_000)]


@pytest.mark.parametrize("codec", ALL)
@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: str(len(p)))
def test_round_trip(codec, payload):
    assert decompress(codec, compress(codec, payload)) == payload


@pytest.mark.parametrize("payload", PAYLOADS[1:], ids=lambda p: str(len(p)))
def test_reads_what_kafka_python_writes(payload):
    from kafka import codec as kc

    assert decompress(GZIP, kc.gzip_encode(payload)) == payload
    assert decompress(SNAPPY, kc.snappy_encode(payload)) == payload  # xerial framing
    assert decompress(SNAPPY, kc.snappy_encode(payload, xerial_compatible=False)) == payload
    assert decompress(LZ4, kc.lz4_encode(payload)) == payload
    assert decompress(ZSTD, kc.zstd_encode(payload)) == payload


@pytest.mark.parametrize("payload", PAYLOADS[1:], ids=lambda p: str(len(p)))
def test_kafka_python_reads_what_kproto_writes(payload):
    from kafka import codec as kc

    assert kc.gzip_decode(compress(GZIP, payload)) == payload
    assert kc.snappy_decode(compress(SNAPPY, payload)) == payload
    assert kc.snappy_decode(compress(SNAPPY, payload, xerial=False)) == payload
    assert kc.lz4_decode(compress(LZ4, payload)) == payload
    assert kc.zstd_decode(compress(ZSTD, payload)) == payload


def test_xerial_framing_layout():
    data = b"abc" * 30_000  # more than one 32 KiB xerial block
    framed = compress(SNAPPY, data)
    assert framed.startswith(b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01")
    assert not compress(SNAPPY, data, xerial=False).startswith(b"\x82SNAPPY")


def test_zstd_frame_without_content_size():
    import zstandard

    data = os.urandom(1000) * 50
    c = zstandard.ZstdCompressor().compressobj()  # streaming: no content size in the header
    frame = c.compress(data) + c.flush()
    assert zstandard.get_frame_parameters(frame).content_size in (0, zstandard.CONTENTSIZE_UNKNOWN)
    assert decompress(ZSTD, frame) == data


def test_gzip_concatenated_members():
    a, b = b"first member ", b"second member"
    assert decompress(GZIP, compress(GZIP, a) + compress(GZIP, b)) == a + b


def test_legacy_lz4_header_checksum():
    """Magic 0 sets carry Kafka 0.8's header checksum, computed over the magic number too."""
    from kproto.codecs import xxh32_short

    data = b"legacy " * 1000
    good = compress(LZ4, data)
    legacy = compress(LZ4, data, legacy_lz4=True)
    flg = legacy[4]
    assert not flg & 0x08, "the legacy format has no content size"
    hc_pos = 6
    assert legacy[hc_pos] == (xxh32_short(legacy[0:hc_pos]) >> 8) & 0xFF
    assert legacy[hc_pos] != (xxh32_short(legacy[4:hc_pos]) >> 8) & 0xFF
    # the correct checksum lz4.frame writes is reproduced by our xxh32 (checks xxh32_short)
    end = 6 + (8 if good[4] & 0x08 else 0)
    assert good[end] == (xxh32_short(good[4:end]) >> 8) & 0xFF
    assert decompress(LZ4, legacy) == data
    assert decompress(LZ4, good) == data


def test_xxh32_known_values():
    from kproto.codecs import xxh32_short

    # Reference values of XXH32 with seed 0 (xxHash's own sanity checks).
    assert xxh32_short(b"") == 0x02CC5D05
    assert xxh32_short(b"a") == 0x550D7456
    assert xxh32_short(b"abc") == 0x32D153FF


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_decompression_bomb_is_bounded(codec):
    bomb = compress(codec, bytes(8 * 1024 * 1024))
    assert len(bomb) < 1024 * 1024
    with pytest.raises(CorruptMessageError, match="more than"):
        decompress(codec, bomb, max_size=256 * 1024)
    assert len(decompress(codec, bomb, max_size=8 * 1024 * 1024)) == 8 * 1024 * 1024


def test_xerial_bomb_counts_all_blocks():
    data = bytes(200_000)  # seven 32 KiB blocks
    with pytest.raises(CorruptMessageError):
        decompress(SNAPPY, compress(SNAPPY, data), max_size=100_000)


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_garbage_and_truncation_raise_corrupt_message(codec):
    good = compress(codec, b"some payload " * 200)
    for bad in (b"\x00garbage\xff" * 5, good[: len(good) // 2], good[:3]):
        with pytest.raises(CorruptMessageError):
            decompress(codec, bad)


def test_unknown_codec_id():
    with pytest.raises(UnsupportedCodecError):
        decompress(7, b"x")
    with pytest.raises(UnsupportedCodecError):
        compress(5, b"x")


def _run(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")))


@pytest.mark.parametrize("codec,module,extra", [(LZ4, "lz4", "kproto[lz4]"),
                                                (ZSTD, "zstandard", "kproto[zstd]"),
                                                (SNAPPY, "snappy", "kproto[snappy]")])
def test_missing_package_names_the_extra(codec, module, extra):
    code = (
        "import sys\n"
        "sys.modules[{m!r}] = None  # makes 'import {m}' raise ImportError\n"
        "from kproto import codecs, errors\n"
        "assert not codecs.is_available({c})\n"
        "try:\n"
        "    codecs.decompress({c}, b'xxxx')\n"
        "except errors.UnsupportedCodecError as e:\n"
        "    print(e)\n"
    ).format(m=module, c=codec)
    out = _run(code)
    assert out.returncode == 0, out.stderr
    assert extra in out.stdout


def test_optional_packages_load_only_when_used():
    code = (
        "import sys\n"
        "import kproto, kproto.codecs, kproto.records\n"
        "from kproto.records import build_batch, read_batches\n"
        "list(read_batches(build_batch([(b'k', b'v')], compression_type=1)).records())\n"
        "print(sorted(m for m in ('lz4', 'zstandard', 'snappy', 'cramjam') if m in sys.modules))\n"
        "kproto.codecs.decompress(3, kproto.codecs.compress(3, b'x'))\n"
        "print('lz4' in sys.modules)\n"
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "True"]


def test_streamed_zstd_bomb_and_truncation():
    import zstandard

    c = zstandard.ZstdCompressor().compressobj()
    frame = c.compress(bytes(8 * 1024 * 1024)) + c.flush()
    with pytest.raises(CorruptMessageError, match="more than"):
        decompress(ZSTD, frame, max_size=100_000)
    with pytest.raises(CorruptMessageError):
        decompress(ZSTD, frame[: len(frame) - 3])


def _streamed_zstd(data: bytes) -> bytes:
    import zstandard

    c = zstandard.ZstdCompressor().compressobj()  # no content size, as Java/librdkafka
    return c.compress(data) + c.flush()


@pytest.mark.parametrize("codec", [LZ4, ZSTD])
def test_bomb_output_stays_near_the_bound(codec):
    # Memory used while refusing a bomb is about the bound, not the bomb's full size.
    import tracemalloc

    bomb = _streamed_zstd(bytes(64 * 1024 * 1024)) if codec == ZSTD else \
        compress(LZ4, bytes(64 * 1024 * 1024))
    tracemalloc.start()
    try:
        with pytest.raises(CorruptMessageError, match="more than"):
            decompress(codec, bomb, max_size=2 * 1024 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024


def test_zstd_frames_in_a_row_and_context_reuse_after_errors():
    a, b = b"first frame " * 100, b"second frame " * 300
    two = _streamed_zstd(a) + _streamed_zstd(b)
    assert decompress(ZSTD, two) == a + b
    assert decompress(ZSTD, compress(ZSTD, a)) == a  # a frame that declares its size
    # A failure half-way through a frame leaves nothing behind for the next call.
    for bad in (two[:len(two) - 5], _streamed_zstd(bytes(1 << 20)), b"\x28\xb5\x2f\xfd" + bytes(8)):
        with pytest.raises(CorruptMessageError):
            decompress(ZSTD, bad, max_size=100_000)
        assert decompress(ZSTD, two) == a + b


@pytest.mark.parametrize("codec", [LZ4, ZSTD])
def test_output_larger_than_the_first_step_is_whole(codec):
    # lz4 starts with a 1 MiB output bound and zstd feeds its input in pieces: a batch
    # that decompresses to several MiB comes out whole and exact.
    import random

    rnd = random.Random(5)
    data = bytes(rnd.getrandbits(8) for _ in range(64 * 1024)) * 48  # 3 MiB
    packed = _streamed_zstd(data) if codec == ZSTD else compress(codec, data)
    assert decompress(codec, packed) == data
    assert decompress(codec, packed, max_size=len(data)) == data
    with pytest.raises(CorruptMessageError, match="more than"):
        decompress(codec, packed, max_size=len(data) - 1)
