"""Headless Chromium for the trace page tests (skipped without one): the DOM a page builds."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def _browser() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _chromium(args: list[str]) -> subprocess.CompletedProcess:
    browser = _browser()
    if browser is None:
        pytest.skip("no headless browser: install Debian's chromium (apt-get install chromium)")
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", "--user-data-dir=" + os.path.join(
                               os.environ.get("TMPDIR", "/tmp"), "kproto-trace-chromium-%d" % os.getpid()),
                           *args], capture_output=True, text=True, timeout=120)


def rendered_dom(events: list[dict], directory, name: str = "page") -> str:
    """The DOM headless Chromium builds from the page of ``events`` (skips without one)."""
    from kproto.tools.trace.html import write_page

    page = str(directory / (name + ".html"))
    write_page(events, page)
    result = _chromium(["--virtual-time-budget=5000", "--dump-dom", "file://" + page])
    assert "data-rendered=" in result.stdout, result.stderr[-2000:]
    return result.stdout


_MEASURE = """<script>
(function () {
  // Every drawn text's box as the browser laid it out (screen pixels), for the layout tests.
  const boxes = [];
  document.querySelectorAll('#timeline text').forEach(function (t) {
    if (!t.textContent) return;
    const b = t.getBoundingClientRect();
    boxes.push({text: t.textContent, x: b.left, y: b.top, w: b.width, h: b.height,
                kind: (t.parentNode.getAttribute('class') || '') + ' ' + (t.getAttribute('class') || '')});
  });
  const pre = document.createElement('pre');
  pre.id = 'label-boxes';
  pre.textContent = JSON.stringify({width: window.innerWidth, boxes: boxes});
  document.body.appendChild(pre);
})();
</script>"""


def label_boxes(page: str, width: int = 1400, height: int = 900) -> dict:
    """``{"width": innerWidth, "boxes": [{text, x, y, w, h, kind}]}`` of every text of the
    page's timeline as headless Chromium lays it out in a window of this size (a measuring
    script is added to a copy of the page)."""
    import html
    import json
    import re

    with open(page, encoding="utf-8") as f:
        text = f.read()
    measured = page[:-len(".html")] + "-measured.html"
    with open(measured, "w", encoding="utf-8") as f:
        f.write(text.replace("</body>", _MEASURE + "</body>"))
    result = _chromium(["--virtual-time-budget=5000", "--window-size={},{}".format(width, height),
                        "--dump-dom", "file://" + measured])
    match = re.search(r'<pre id="label-boxes">(.*?)</pre>', result.stdout, re.S)
    assert match, result.stderr[-2000:]
    return json.loads(html.unescape(match.group(1)))
