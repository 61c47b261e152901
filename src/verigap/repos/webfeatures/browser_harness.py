"""Serve a WSGI app on loopback and drive headless Chromium at it, inside a task's sandbox.

This file is copied next to a feature task's hidden tests (as ``tests/_verigap_browser.py``) and
imported there, so it imports nothing from verigap: only the standard library, Werkzeug (the
app's own server) and Selenium. It works in a bubblewrap sandbox with the network unshared,
which is why it differs from a desktop Selenium setup:

- ``/usr/bin/chromium`` is Debian's shell wrapper that reads ``/etc/chromium.d``, which the
  sandbox does not mount, so the real binary under ``/usr/lib/chromium`` is started instead;
- the sandbox has no ``/etc/hosts``, so "localhost" does not resolve: the driver is reached at
  127.0.0.1 and the browser talks to the driver over a pipe (``--remote-debugging-pipe``);
- Chromium reserves a large address space up front, so the sandbox's address-space limit must
  be lifted for the command that runs a browser check (see ``BROWSER_MEMORY_MB`` in ``grade``).

Nothing is downloaded: the driver path is given, so Selenium's driver manager never runs.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

CHROMIUM_CANDIDATES = ("/usr/lib/chromium/chromium", "/usr/bin/chromium")
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
)


def chromium_binary() -> str:
    """The Chromium executable; a clear error naming the install line when there is none."""
    for path in CHROMIUM_CANDIDATES:
        if os.path.isfile(path):
            return path
    raise RuntimeError(
        "no Chromium found; install it with `apt-get install -y chromium chromium-driver`"
    )


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Run ``app`` on 127.0.0.1 (a free port) in a thread; yield its base URL."""
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=10)


@contextmanager
def browser(*, page_load_timeout: float = 30.0) -> Iterator[Any]:
    """A headless Chromium under Selenium, quit on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common import utils

    class LoopbackService(Service):
        """The driver at 127.0.0.1: without /etc/hosts, "localhost" does not resolve."""

        @property
        def service_url(self) -> str:
            return f"http://127.0.0.1:{self.port}"

        def is_connectable(self) -> bool:
            return utils.is_connectable(self.port, "127.0.0.1")

    if not os.path.isfile(CHROMEDRIVER):
        raise RuntimeError(
            f"{CHROMEDRIVER} is missing; install it with `apt-get install -y chromium-driver`"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = chromium_binary()
    profile = tempfile.mkdtemp(prefix="verigap-chromium-")
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=LoopbackService(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(page_load_timeout)
    try:
        yield driver
    finally:
        driver.quit()


def log_in(driver: Any, base: str, username: str, password: str) -> None:
    """Sign in through the app's login form, the way a user would."""
    from selenium.webdriver.common.by import By

    driver.get(f"{base}/login")
    driver.find_element(By.NAME, "username").send_keys(username)
    driver.find_element(By.NAME, "password").send_keys(password)
    driver.find_element(By.CSS_SELECTOR, "form [type=submit]").click()


def visible_text(driver: Any) -> str:
    """What a user reads on the current page (hidden elements excluded)."""
    from selenium.webdriver.common.by import By

    return driver.find_element(By.TAG_NAME, "body").text


def shown(driver: Any) -> str:
    """The page's visible text plus the values of its form fields (what a user sees in them)."""
    from selenium.webdriver.common.by import By

    values = [
        e.get_attribute("value") or ""
        for e in driver.find_elements(By.CSS_SELECTOR, "input:not([type=hidden]), textarea")
    ]
    return "\n".join([visible_text(driver), *values])
