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
    from kproto.trace.html import write_page

    page = str(directory / (name + ".html"))
    write_page(events, page)
    result = _chromium(["--virtual-time-budget=5000", "--dump-dom", "file://" + page])
    assert "data-rendered=" in result.stdout, result.stderr[-2000:]
    return result.stdout
