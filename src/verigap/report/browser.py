"""Check a built site in a real browser: headless Chromium driven through Selenium.

Why Selenium: Debian ships ``chromium-driver`` built from the same source as ``chromium``, so
driver and browser versions always match and nothing is downloaded at run time (the driver path
is given explicitly, so Selenium's own driver manager never runs). Playwright would need either
its own browser download or a Debian Chromium it was not built against.

The site is served on 127.0.0.1 (nothing leaves the machine). For every page the check reads the
browser console (any error is a problem), waits for every image and requires a non-empty
decoded bitmap, requires that a page which is not an appendix opens with prose rather than a
table, and resolves every link against the server.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from verigap.errors import ConfigError

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
INSTALL = "sudo apt-get install -y chromium chromium-driver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
)

#: Run in the page: images (decoded size), whether prose comes before any table, links.
PAGE_PROBE = """
const done = arguments[arguments.length - 1];
const imgs = Array.from(document.images);
Promise.all(imgs.map(i => i.complete ? Promise.resolve() : new Promise(r => {
  i.addEventListener('load', r); i.addEventListener('error', r); })))
 .then(() => {
  const main = document.querySelector('main');
  const first = main ? Array.from(main.children).find(e => e.tagName !== 'H1') : null;
  const prose = main ? Array.from(main.querySelectorAll('p')).map(p => p.innerText.length) : [];
  done({
    kind: document.body.dataset.kind || '',
    title: document.querySelector('main h1') ? document.querySelector('main h1').innerText : '',
    nav: document.querySelectorAll('nav a').length,
    images: imgs.map(i => ({src: i.getAttribute('src'), w: i.naturalWidth,
                            h: i.naturalHeight, alt: i.getAttribute('alt') || ''})),
    first: first ? first.tagName : '',
    prose: prose.length ? Math.max(...prose) : 0,
    links: Array.from(document.querySelectorAll('a[href]')).map(a => a.href),
  });
 });
"""


@dataclass
class BrowserReport:
    pages: int = 0
    images: int = 0
    links: int = 0
    problems: list[str] = field(default_factory=list)


def require_browser() -> None:
    """Refuse with the install line when Chromium, its driver or Selenium is missing."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).is_file()]
    if missing:
        raise ConfigError(
            f"the browser check needs {' and '.join(missing)}: run `{INSTALL}` "
            "(or `make test`, which installs them when run as root)"
        )
    try:
        import selenium  # noqa: F401
    except ImportError as e:
        raise ConfigError("the browser check needs Selenium: run `pip install -e '.[dev]'`") from e


@contextmanager
def serve(root: Path) -> Iterator[str]:
    """Serve ``root`` on a free loopback port for the duration of the block."""

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


@contextmanager
def chromium(width: int = 1280, height: int = 900) -> Iterator[Any]:
    """A headless Chromium under Selenium with a fresh profile, closed afterwards."""
    require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="verigap-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER))
    driver.set_script_timeout(60)
    # The viewport itself, not the window around it: what a reader's screen shows.
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def check_site(site: Path) -> BrowserReport:
    """Open every page of ``site`` in headless Chromium and list what a reader would hit."""
    site = Path(site)
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    if not pages:
        raise ConfigError(f"{site} has no pages; build it with `verigap site --out {site}`")
    report = BrowserReport(pages=len(pages))
    links: dict[str, str] = {}
    with serve(site) as base, chromium() as driver:
        for page in pages:
            driver.get(f"{base}/{page}")
            info = driver.execute_async_script(PAGE_PROBE)
            for entry in driver.get_log("browser"):
                if entry.get("level") == "SEVERE":
                    report.problems.append(f"{page}: console error: {entry.get('message')}")
            if not info["title"] or not info["nav"]:
                report.problems.append(f"{page}: no title or navigation")
            if info["kind"] != "appendix" and (info["first"] == "TABLE" or info["prose"] < 80):
                report.problems.append(f"{page}: opens with data, not prose (not an appendix)")
            for img in info["images"]:
                report.images += 1
                if not (img["w"] > 0 and img["h"] > 0):
                    report.problems.append(f"{page}: image does not render: {img['src']}")
                if not img["alt"].strip():
                    report.problems.append(f"{page}: image without alt text: {img['src']}")
            for href in info["links"]:
                report.links += 1
                links.setdefault(href.split("#")[0], page)
        for url, page in links.items():
            if not url.startswith(base):
                report.problems.append(f"{page}: link leaves the site: {url}")
                continue
            try:
                with urllib.request.urlopen(url, timeout=10) as r:  # noqa: S310 - loopback
                    r.read(1)
            except urllib.error.URLError:
                report.problems.append(f"{page}: broken link {url.removeprefix(base + '/')}")
    return report


def screenshot(site: Path, page: str, out: Path, width: int = 1280, height: int = 900) -> Path:
    """A PNG of ``page`` as a reader first sees it (the top ``height`` pixels)."""
    with serve(Path(site)) as base, chromium(width, height) as driver:
        driver.get(f"{base}/{page}")
        driver.save_screenshot(str(out))
    return out
