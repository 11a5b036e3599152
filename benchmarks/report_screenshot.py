"""The capacity report's screenshot in the docs (docs/capacity-report.png), made from the example fleet as
`gpuc plan intents --html` writes it, in headless Chromium. The PNG carries the digest of the page it shows (a tEXt
chunk), so a test can tell, without a browser, when the report has changed and the screenshot is stale.

    python -m benchmarks.report_screenshot docs/capacity-report.png
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import struct
import sys
import tempfile
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KEY = b"gpuc-report-sha256"
WIDTH = 1200  # the page's max-width, with its margins


def example_report(out: Path) -> str:
    """Write the example fleet's capacity report to `out`, as `gpuc plan intents --html` does; its digest."""
    from compiler.cli import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.chdir(REPO):
        code = main(["plan", "intents", "--html", str(out)])
    if code != 0:
        raise RuntimeError(f"gpuc plan intents --html exited {code}")
    return hashlib.sha256(out.read_bytes()).hexdigest()


def with_digest(png: bytes, digest: str) -> bytes:
    """`png` with a tEXt chunk KEY=digest before its IEND chunk."""
    data = KEY + b"\0" + digest.encode()
    chunk = struct.pack(">I", len(data)) + b"tEXt" + data + struct.pack(">I", zlib.crc32(b"tEXt" + data))
    end = png.rindex(b"IEND") - 4
    return png[:end] + chunk + png[end:]


def digest_of(png: bytes) -> str | None:
    """The report digest a screenshot carries, or None."""
    i = 8
    while i + 8 <= len(png):
        length, kind = struct.unpack(">I4s", png[i:i + 8])
        if kind == b"tEXt" and png[i + 8:i + 8 + length].startswith(KEY + b"\0"):
            return png[i + 8 + len(KEY) + 1:i + 8 + length].decode()
        i += 12 + length
    return None


def screenshot(page: Path, digest: str, profile: Path) -> bytes:
    """The whole page at WIDTH, in headless Chromium, carrying `digest`."""
    from benchmarks.report_bench import headless_chromium

    with headless_chromium(profile) as browser:
        browser.get(page.as_uri())
        browser.execute_script("document.documentElement.style.overflow = 'hidden'")  # no scroll bar in the picture
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.set_window_size(WIDTH, height + 140)  # the window's own frame, in headless mode too
        browser.execute_script(f"window.resizeTo({WIDTH}, {height})")
        png = browser.get_screenshot_as_png()
    return with_digest(png, digest)


def main(argv: list[str]) -> int:
    target = Path(argv[0]) if argv else REPO / "docs" / "capacity-report.png"
    with tempfile.TemporaryDirectory(prefix="gpuc-screenshot-") as tmp:
        page = Path(tmp) / "report.html"
        png = screenshot(page, example_report(page), Path(tmp) / "profile")
    staged = target.with_name(f".{target.name}.tmp")
    staged.write_bytes(png)
    staged.replace(target)
    print(f"wrote {target} ({len(png):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
