"""Headless Chromium (Debian's package) for the HTML checks: the rendered DOM and the page's console lines."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

needs_chromium = pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed "
                                    "(apt-get install chromium) so the HTML cannot be rendered headless")


def render(page: Path, scratch: Path) -> tuple[str, list[str]]:
    """The page's DOM after loading it offline, and the console messages and uncaught errors it logged."""
    profile = tempfile.mkdtemp(dir=scratch)
    cmd = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, [ln for ln in proc.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]
