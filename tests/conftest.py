"""Suite-wide set-up check: the sandbox tests mean something only under bubblewrap.

Tests that depend on containment (graders, exploits, the sandbox's promises) run under bwrap and
never switch to the unsafe backend on their own, so the suite refuses to start without it.
`make test` installs it first (through apt as root) or says what to run.
"""

from __future__ import annotations

import shutil

import pytest


def pytest_sessionstart(session: pytest.Session) -> None:
    if shutil.which("bwrap") is None:
        pytest.exit("bubblewrap (bwrap) is not installed and the sandbox tests need it: run "
                    "`sudo apt-get install -y bubblewrap` (or `make test`, which installs it "
                    "when run as root)", returncode=3)
