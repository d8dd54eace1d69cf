"""Driving Debian's chromium headless through playwright (the system browser: nothing is downloaded at
test time), and the checks every HTML page of infercheck must pass in it: no console or page error,
no request for anything but a local file, every internal link resolving, every plot with a rendered size."""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

LOCAL_SCHEMES = ("file:", "data:", "about:", "blob:")
# Every top-level <svg> and every <img>, with <details> opened first (a plot may sit in a collapsed
# one): those whose box is empty, or whose image did not load.
UNRENDERED_JS = """() => {
  document.querySelectorAll("details").forEach((d) => { d.open = true; });
  const plots = Array.from(document.querySelectorAll("svg:not(svg svg), img"));
  const empty = plots.filter((el) => {
    const box = el.getBoundingClientRect();
    return box.width <= 0 || box.height <= 0 || (el.tagName === "IMG" && !el.naturalWidth);
  });
  return {count: plots.length, empty: empty.map((el) => el.outerHTML.slice(0, 120))};
}"""


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def chromium_or_skip() -> str:
    """The system chromium's path. Without it (or playwright) the test skips with the reason, but
    under CI=true it fails: the browser test must not pass by not running."""
    exe = shutil.which("chromium")
    missing = [what for what, found in (("Debian's chromium (apt-get install chromium)", exe),
                                        ("playwright (pip install -e '.[test]')", importlib.util.find_spec("playwright")))
               if not found]
    if missing:
        reason = f"the browser test needs {' and '.join(missing)}; `make setup` installs both"
        if in_ci():
            pytest.fail(reason)
        pytest.skip(reason)
    assert exe is not None
    return exe


@contextmanager
def chromium() -> Iterator:
    """A headless chromium (playwright passes --no-sandbox, so it runs as root too)."""
    from playwright.sync_api import sync_playwright

    exe = chromium_or_skip()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Loaded:
    """One page opened from a file, with what went wrong while it loaded and ran."""
    page: object
    path: Path
    errors: list[str] = field(default_factory=list)

    def broken_links(self) -> list[str]:
        """Every <a href> that names a missing file or a missing id on its page (links with a
        host, http or mailto, are not internal and not followed)."""
        broken = []
        for href in self.page.eval_on_selector_all("a[href]", "links => links.map(a => a.getAttribute('href'))"):
            parts = urlsplit(href)
            if parts.scheme not in ("", "file") or parts.netloc:
                continue
            target = (self.path.parent / unquote(parts.path)).resolve() if parts.path else self.path
            if not target.exists():
                broken.append(f"{href}: no file {target}")
            elif parts.fragment and target == self.path and not self.page.evaluate(
                    "id => document.getElementById(id) !== null", unquote(parts.fragment)):
                broken.append(f"{href}: no element with that id")
        return broken

    def plots(self) -> dict:
        """{"count": plots on the page, "empty": those not rendered}."""
        return self.page.evaluate(UNRENDERED_JS)


@contextmanager
def loaded(browser, path: Path, width: int = 1280) -> Iterator[Loaded]:
    """path opened via file:// in a fresh page; console errors, uncaught exceptions and any request
    that would leave the machine are collected into .errors."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    out = Loaded(page, path.resolve())
    page.on("console", lambda msg: msg.type == "error" and out.errors.append(f"console: {msg.text}"))
    page.on("pageerror", lambda exc: out.errors.append(f"page error: {exc}"))
    page.on("request", lambda req: req.url.startswith(LOCAL_SCHEMES) or out.errors.append(f"network: {req.url}"))
    page.goto(out.path.as_uri(), wait_until="load")
    try:
        yield out
    finally:
        page.close()
