"""``python -m kproto trace`` as a user runs it, and the timeline page in a real browser.

A kproto group member reads a topic of the mock cluster through the CLI proxy (a child
process, stopped with SIGINT as Ctrl-C would); its ``kproto.events`` go to a file; ``trace
render`` merges both into one page. The page is then opened by headless Chromium (Debian's
``chromium``; without it those tests skip with the reason): the DOM the browser built must
hold every lane and arrow of the trace and the decoded fields of a chosen exchange, and the
screenshot must show the lanes' colours (the PNG is decoded here with zlib).
"""

from __future__ import annotations

import json
import os
import re
import signal
import struct
import subprocess
import sys
import time
import zlib

import pytest

from kproto import KafkaConsumer
from kproto.transition_log import JsonlEventHandler
from kproto.tools.trace.report import read_events, time_key
from kproto.tools.trace.timeline import build_timeline
from tests.support.signals import interruptible
from tests.integration.trace.browser import _chromium, label_boxes

RECORDS = 30


@pytest.fixture(scope="module")
def traced(mock_cluster, tmp_path_factory):
    """A CLI proxy run: (its stdout, stderr, the jsonl, the kproto events file, the page)."""
    directory = tmp_path_factory.mktemp("trace")
    topic = mock_cluster.new_topic(partitions=2)
    mock_cluster.produce(topic, RECORDS)
    jsonl, events_file, html = (str(directory / n) for n in ("trace.jsonl", "events.jsonl", "live.html"))
    proc = subprocess.Popen([sys.executable, "-m", "kproto", "trace", "--upstream",
                             "{}:{}".format(*mock_cluster.addresses[0]), "--jsonl", jsonl,
                             "--html", html], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=interruptible)
    try:
        first = proc.stdout.readline()
        match = re.search(r"listening on (\S+) for", first)
        assert match, first + proc.stderr.read()
        handler = JsonlEventHandler.attach(events_file)
        read = 0
        try:
            with KafkaConsumer(bootstrap_servers=match.group(1), group_id="trace-cli-" + topic,
                               client_id="trace-cli", auto_offset_reset="earliest",
                               enable_auto_commit=True) as consumer:
                consumer.subscribe([topic])
                deadline = time.monotonic() + 60
                while read < RECORDS and time.monotonic() < deadline:
                    read += sum(len(r) for r in consumer.poll(200).values())
                # The member owns its partitions a while longer, as a consumer that goes on
                # would: on a quiet machine the read takes milliseconds after a join of
                # seconds, and an ownership segment that short gets no label on the page.
                held = time.monotonic() + 1.5
                while time.monotonic() < held:
                    consumer.poll(200)
        finally:
            handler.detach()
        assert read == RECORDS
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return {"stdout": first + out, "stderr": err, "jsonl": jsonl, "events": events_file,
            "html": html, "dir": directory}


def test_the_cli_prints_one_line_per_exchange_and_a_summary(traced):
    lines = traced["stdout"].splitlines()
    # In time order: each exchange is stamped with the time its answer came, and printed
    # then (the JSON lines, written as printed, have the whole times).
    with open(traced["jsonl"], encoding="utf-8") as f:
        stamped = [time_key(json.loads(line)) for line in f]
    assert stamped == sorted(stamped)
    fetches = [line for line in lines if " Fetch v" in line]
    assert fetches and all(" trace-cli " in line for line in fetches)
    assert any(re.search(r"JoinGroup v\d+ #\d+ [\d.]+ms .*generation=\d+", line) for line in lines)
    assert any("SyncGroup" in line and "assignment=[" in line for line in lines)
    recorded = [e for e in read_events([traced["jsonl"]]) if e["kind"] == "exchange"]
    assert len([line for line in lines if re.search(r" #\d+ ", line)]) == len(recorded)
    assert "requests" in traced["stderr"] and "Fetch" in traced["stderr"]
    assert "timeline written to" in traced["stderr"]
    assert all("request" in e for e in recorded)  # the decoded trees are in the jsonl


def test_the_cli_filters_by_api(mock_cluster):
    proc = subprocess.Popen([sys.executable, "-m", "kproto", "trace", "--upstream",
                             "{}:{}".format(*mock_cluster.addresses[0]), "--api", "Metadata"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=interruptible)
    try:
        address = re.search(r"listening on (\S+) for", proc.stdout.readline()).group(1)
        with KafkaConsumer(bootstrap_servers=address, client_id="trace-filter") as consumer:
            assert consumer.topics() is not None
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    exchanges = [line for line in out.splitlines() if re.search(r" #\d+ ", line)]
    assert exchanges and all(" Metadata v" in line for line in exchanges)
    assert "ApiVersions" in err  # the summary still counts everything


def _render(traced) -> str:
    page = str(traced["dir"] / "page.html")
    result = subprocess.run([sys.executable, "-m", "kproto", "trace", "render", traced["jsonl"],
                             traced["events"], "-o", page], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    return page


def test_the_page_is_self_contained(traced):
    text = open(_render(traced), encoding="utf-8").read()
    assert not re.search(r"<(script|img|link|iframe)[^>]*\b(src|href)=", text)
    assert not re.search(r"url\((?!'?#)", text) and "@import" not in text  # url(#id) is local
    assert "default-src 'none'" in text  # the browser is told to load nothing either
    assert os.path.getsize(traced["html"]) > 0  # --html wrote the same kind of page on exit


def _model(traced) -> dict:
    return build_timeline(read_events([traced["jsonl"], traced["events"]]))


def test_the_browser_draws_every_lane_and_arrow_and_shows_decoded_fields(traced):
    page = _render(traced)
    model = _model(traced)
    join = next(i for i, d in enumerate(model["details"]) if d.get("api") == "JoinGroup")
    result = _chromium(["--virtual-time-budget=5000", "--dump-dom",
                        "file://{}#show={}".format(page, join)])
    dom = result.stdout
    assert 'data-rendered="{}"'.format(len(model["arrows"])) in dom, result.stderr[-2000:]
    assert dom.count('class="arrow ') >= len(model["arrows"])
    for lane in model["lanes"]:
        assert ">{}<".format(lane["label"].replace(">", "&gt;")) in dom
    generations = [m["text"] for m in model["markers"] if m["text"].startswith("generation ")]
    assert generations and all(g in dom for g in generations)
    # The details panel holds the decoded JoinGroup exchange (what a click shows).
    details = re.search(r'<pre id="details">(.*?)</pre>', dom, re.S).group(1)
    assert '"api": "JoinGroup"' in details and '"generation_id"' in details.replace("&quot;", '"')


def _png_pixels(path: str) -> tuple[int, int, list[bytes]]:
    """Width, height and rows of an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes)."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            assert depth == 8 and color in (2, 6) and interlace == 0
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw, rows, prev, stride = zlib.decompress(idat), [], bytearray(width * bpp), width * bpp
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([bytes(line[j:j + 3]) for j in range(0, stride, bpp)])
        prev = line
    return width, height, rows


def test_the_screenshot_shows_the_lanes(traced):
    page = _render(traced)
    shot = str(traced["dir"] / "page.png")
    result = _chromium(["--virtual-time-budget=5000", "--window-size=1000,600",
                        "--screenshot=" + shot, "file://" + page])
    assert os.path.exists(shot), result.stderr[-2000:]
    width, height, rows = _png_pixels(shot)
    assert (width, height) == (1000, 600)
    colours = {}
    for row in rows:
        for px in row:
            colours[px] = colours.get(px, 0) + 1
    # The lane backgrounds of the page's CSS: brokers, group members, kproto's inner events.
    for name, rgb in (("broker", (0xee, 0xf3, 0xff)), ("member", (0xf5, 0xff, 0xf0)),
                      ("kproto", (0xff, 0xf8, 0xec))):
        assert colours.get(bytes(rgb), 0) > 2000, "no {} lane in the screenshot".format(name)


def _crowded_events() -> list[dict]:
    """Three members through six generations within two seconds of a minute-long trace, with
    MEMBER_ID_REQUIRED and REBALANCE_IN_PROGRESS steps: the densest story a page draws."""
    events, cid, t = [], 0, 1000.0
    base = {"kind": "exchange", "broker": "127.0.0.1:9092", "node": 1, "version": 5,
            "latency_ms": 1.0, "req_bytes": 10, "resp_bytes": 10, "api_key": 11}

    def add(at: float, conn: str, api: str, summary: dict, errors=()) -> None:
        nonlocal cid
        cid += 1
        events.append(dict(base, t=at, t_end=at + 0.002, conn=conn, client_id=conn, api=api,
                           correlation_id=cid, summary=summary, errors=list(errors)))

    members = ["consumer-{}-{}".format(i, "0123456789abcdef" * 2) for i in range(3)]
    for generation in range(1, 7):
        for i, member in enumerate(members):
            at = t + generation * 0.3 + i * 0.01
            if generation == 1:
                add(at - 0.005, "c%d" % i, "JoinGroup", {"group": "g", "member": "",
                    "member_id": member}, ["MEMBER_ID_REQUIRED"])
            else:
                add(at - 0.005, "c%d" % i, "Heartbeat", {"group": "g", "member": member,
                    "generation": generation - 1}, ["REBALANCE_IN_PROGRESS"])
            add(at, "c%d" % i, "JoinGroup", {"group": "g", "member": member, "member_id": member,
                "generation": generation, "leader": members[0]})
            owned = ["topic-with-a-long-name-{}".format(p) for p in range(generation + i)]
            add(at + 0.05, "c%d" % i, "SyncGroup", {"group": "g", "member": member,
                "generation": generation, "assignment": owned})
    add(t + 60, "c0", "Metadata", {"topics": None})
    return events


@pytest.mark.parametrize("trace", ["cli", "crowded"])
def test_labels_are_legible_and_never_overlap_at_1400_px(traced, trace):
    if trace == "cli":
        page = _render(traced)
    else:
        page = str(traced["dir"] / "crowded.html")
        from kproto.tools.trace.html import write_page

        write_page(_crowded_events(), page)
    measured = label_boxes(page, 1400, 900)
    assert measured["width"] == 1400
    boxes = measured["boxes"]
    assert any(b["text"].startswith("generation ") for b in boxes), [b["text"] for b in boxes]
    for box in boxes:
        assert box["h"] >= 10 and box["w"] > 0, box  # drawn at a readable size
        assert "\u2026" not in box["text"], box  # no label cut mid-word
    overlaps = [(a["text"], b["text"]) for i, a in enumerate(boxes) for b in boxes[i + 1:]
                if a["x"] < b["x"] + b["w"] - 0.5 and b["x"] < a["x"] + a["w"] - 0.5
                and a["y"] < b["y"] + b["h"] - 0.5 and b["y"] < a["y"] + a["h"] - 0.5]
    assert overlaps == []
    # Segment labels are their whole text, or its name ("gen 3"), or its number: never cut.
    model = build_timeline(read_events([traced["jsonl"], traced["events"]])) if trace == "cli" \
        else build_timeline(_crowded_events())
    names = {s["text"] for s in model["segments"]} | {s["text"].split(":")[0] for s in model["segments"]}
    shown = [b["text"] for b in boxes if "segment" in b["kind"]]
    assert shown and all(text in names or text.isdigit() for text in shown), shown


def test_normal_handshake_steps_are_not_drawn_as_errors(traced):
    page = str(traced["dir"] / "steps.html")
    from kproto.tools.trace.html import write_page

    events = _crowded_events()
    write_page(events, page)
    model = build_timeline(events)
    steps = [m["text"] for m in model["markers"] if m["cls"] == "step"]
    assert any("MEMBER_ID_REQUIRED" in s for s in steps) and any("REBALANCE_IN_PROGRESS" in s for s in steps)
    assert [m for m in model["markers"] if m["cls"] == "bad"] == []
    dom = _chromium(["--virtual-time-budget=5000", "--dump-dom", "file://" + page]).stdout
    assert 'class="arrow resp api-group step"' in dom and "arrow resp bad" not in dom


def test_html_alone_keeps_the_events_on_disk_while_the_proxy_runs(mock_cluster, tmp_path):
    """``--html`` without ``--jsonl``: each event goes to a temporary JSON-lines spool as it
    happens (a proxy left running for hours holds none of them in memory), the page is
    rendered from it at exit, and the spool is deleted."""
    spool_dir = tmp_path / "tmp"
    spool_dir.mkdir()
    page = str(tmp_path / "page.html")
    env = dict(os.environ, TMPDIR=str(spool_dir))
    proc = subprocess.Popen([sys.executable, "-m", "kproto", "trace", "--upstream",
                             "{}:{}".format(*mock_cluster.addresses[0]), "--html", page],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=interruptible)
    try:
        first = proc.stdout.readline()
        address = re.search(r"listening on (\S+) for", first).group(1)
        with KafkaConsumer(bootstrap_servers=address, client_id="trace-spool") as consumer:
            for _ in range(5):
                assert consumer.topics() is not None
        (spool,) = list(spool_dir.iterdir())
        deadline = time.monotonic() + 30
        while True:  # the proxy writes each exchange as its answer passes
            with open(spool, encoding="utf-8") as f:
                spooled = [json.loads(line) for line in f if line.strip()]
            if sum(1 for e in spooled if e.get("kind") == "exchange" and e["api"] == "Metadata") >= 5:
                break
            assert time.monotonic() < deadline, "the spool holds {} events".format(len(spooled))
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert list(spool_dir.iterdir()) == []  # the spool went with the proxy
    text = open(page, encoding="utf-8").read()
    payload = re.search(r'<script type="application/json" id="trace-data">(.*?)</script>', text, re.S).group(1)
    model = json.loads(payload.replace("<\\/", "</"))
    exchanges = [line for line in (first + out).splitlines() if re.search(r" #\d+ ", line)]
    assert len(model["arrows"]) >= len(exchanges) >= 5
    assert sum(1 for d in model["details"] if d.get("api") == "Metadata") >= 5
