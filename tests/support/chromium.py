"""Headless Chromium for tests that look at HTML the project writes (report.html).

``hack/chromium`` finds Debian's ``chromium`` or installs it (as root, with apt-get); a test that needs
it fails with that script's reason rather than skipping.
"""

from __future__ import annotations

import struct
import subprocess
import zlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--hide-scrollbars",
    "--no-first-run",
    "--disable-extensions",
    "--disable-background-networking",
    "--mute-audio",
]


def chromium() -> str:
    proc = subprocess.run([str(REPO / "hack" / "chromium")], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        pytest.fail(f"hack/chromium: {proc.stderr.strip()[-2000:]}", pytrace=False)
    return proc.stdout.strip().splitlines()[-1]


def _run(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    # A fresh profile each time: concurrent runs would otherwise share (and lock) one.
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tfps-chromium-") as profile:
        return subprocess.run(
            [chromium(), *_FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=timeout
        )


def dump_dom(page: Path) -> str:
    """The DOM after Chromium loaded and laid out ``page`` (offline: networking is cut by the flags
    and the report fetches nothing)."""
    proc = _run(["--dump-dom", page.resolve().as_uri()])
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr[-2000:]
    return proc.stdout


def screenshot(page: Path, png: Path, size: tuple[int, int] = (1200, 1400)) -> Path:
    proc = _run([f"--window-size={size[0]},{size[1]}", f"--screenshot={png}", page.resolve().as_uri()])
    assert proc.returncode == 0 and png.is_file(), proc.stderr[-2000:]
    return png


def png_ink(png: Path) -> tuple[int, int, float]:
    """(width, height, share of pixels that are not white) of an 8-bit RGB(A) PNG, decoded here."""
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    height = channels = 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        chunk = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and color in (2, 6), f"unexpected PNG format depth={depth} color={color}"
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    prev = bytearray(stride)
    inked = 0
    for row in range(height):
        f = raw[row * (stride + 1)]
        line = bytearray(raw[row * (stride + 1) + 1 : (row + 1) * (stride + 1)])
        for i in range(stride):  # undo the PNG filter of this row
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        inked += sum(1 for x in range(0, stride, channels) if min(line[x : x + 3]) < 235)
        prev = line
    return width, height, inked / (width * height)
