"""Golden batches written by librdkafka and fetched raw from real brokers (the librdkafka
mock cluster and Tansu): see tests/data/records/regenerate.py. The expected records come
from the producer's inputs and delivery reports, not from kproto."""

import json
import os

import pytest

from kproto import codecs
from kproto.errors import CorruptRecordError
from kproto.records import CONTROL_ABORT, CONTROL_COMMIT, CREATE_TIME, read_batches

DATA = os.path.join(os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")), "data", "records")
NAMES = sorted(n[:-4] for n in os.listdir(DATA) if n.endswith(".bin"))


def _load(name):
    with open(os.path.join(DATA, name + ".bin"), "rb") as f:
        data = f.read()
    with open(os.path.join(DATA, name + ".json")) as f:
        meta = json.load(f)
    return data, meta


def _unhex(h):
    return None if h is None else bytes.fromhex(h)


def test_golden_set_is_complete():
    assert {"mock-" + c for c in ("none", "gzip", "snappy", "lz4", "zstd")} <= set(NAMES)
    assert any(n.startswith("tansu-transactions") for n in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_golden_records(name):
    data, meta = _load(name)
    check = name != "mock-transactions"  # the mock writes markers with CRC 0
    batches = list(read_batches(data, check_crcs=check, topic="golden", partition=0))
    reader_records = []
    markers = []
    for batch in batches:
        assert batch.magic == 2
        if batch.is_control_batch:
            m = batch.control_record()
            markers.append([m.offset, {CONTROL_COMMIT: "commit", CONTROL_ABORT: "abort"}[m.type]])
            continue
        assert codecs.CODEC_NAMES[batch.compression_type] == meta["codec"]
        assert batch.record_count == len(list(batch.records))
        reader_records.extend(batch.records)
    assert markers == meta["markers"]
    expected = meta["records"]
    assert len(reader_records) == len(expected)
    for rec, exp in zip(reader_records, expected):
        key, value = _unhex(exp["key"]), _unhex(exp["value"])
        headers = tuple((k, _unhex(v)) for k, v in exp["headers"])
        assert (rec.offset, rec.key, rec.value, rec.headers, rec.timestamp) == (
            exp["offset"], key, value, headers, exp["timestamp"])
        assert rec.timestamp_type == CREATE_TIME
        assert rec.serialized_key_size == (-1 if key is None else len(key))
        assert rec.serialized_value_size == (-1 if value is None else len(value))
        assert rec.serialized_header_size == (
            sum(len(k.encode()) + len(v or b"") for k, v in headers) if headers else -1)


@pytest.mark.parametrize("name", [n for n in NAMES if "transactions" in n])
def test_golden_transactional_batches(name):
    data, meta = _load(name)
    batches = list(read_batches(data, check_crcs=False))
    assert all(b.is_transactional and b.producer_id >= 0 for b in batches)
    assert len({b.producer_id for b in batches}) == 1


def test_mock_cluster_markers_fail_crc_check():
    """The librdkafka mock writes control batches with CRC 0: check_crcs catches that."""
    data, meta = _load("mock-transactions")
    marker_offset = meta["markers"][0][0]
    with pytest.raises(CorruptRecordError) as info:
        for batch in read_batches(data, check_crcs=True, topic="golden", partition=0):
            list(batch.records)
    assert info.value.record_offset == marker_offset


@pytest.mark.parametrize("name", NAMES)
def test_golden_agrees_with_kafka_python(name):
    from kafka.record.memory_records import MemoryRecords

    data, _ = _load(name)
    theirs = []
    for batch in MemoryRecords(data):
        theirs.extend((r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch)
    ours = [(r.offset, r.timestamp, r.key, r.value, r.headers)
            for r in read_batches(data, check_crcs=False).records()]
    assert ours == theirs


@pytest.mark.parametrize("name,module,extra", [("mock-lz4", "lz4", "kproto[lz4]"),
                                               ("mock-zstd", "zstandard", "kproto[zstd]"),
                                               ("mock-snappy", "snappy", "kproto[snappy]")])
def test_missing_codec_package_while_reading(name, module, extra):
    """Batch headers still read; decoding the records names the pip extra to install."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "sys.modules[{m!r}] = None\n"
        "from kproto.errors import UnsupportedCodecError\n"
        "from kproto.records import read_batches\n"
        "data = open({p!r}, 'rb').read()\n"
        "batches = list(read_batches(data))\n"
        "print(len(batches), sum(b.record_count for b in batches))\n"
        "try:\n"
        "    list(batches[0].records)\n"
        "except UnsupportedCodecError as e:\n"
        "    print(e)\n"
    ).format(m=module, p=os.path.join(DATA, name + ".bin"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")))
    assert out.returncode == 0, out.stderr
    counts, message = out.stdout.splitlines()
    assert counts.split()[1] == str(len(_load(name)[1]["records"]))
    assert extra in message
