"""Suite-wide set-up check: the sandbox tests mean something only under bubblewrap.

Tests that depend on containment (graders, exploits, the sandbox's promises) run under bwrap and
never switch to the unsafe backend on their own, so the suite refuses to start without it.
`make test` installs it first (through apt as root) or says what to run.

It also holds the one loopback stand-in for a model API (``fake_model_server``) that the model
clients' tests share, and ``benchmark_script``, which loads a script from ``benchmarks/`` as a
module.

verigap is imported here, before any test module, so NumPy and PyTorch load with the kernels ``verigap.numerics``
pins, here and in every worker this run starts (they inherit the environment).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from verigap import numerics  # pins NumPy's and PyTorch's kernels before any test loads them


def pytest_sessionstart(session: pytest.Session) -> None:
    if found := numerics.problems():  # a plugin loaded NumPy or PyTorch before the pin
        pytest.exit(
            f"{'; '.join(found)}: run the tests with the pin exported "
            "(`eval $(verigap numerics --env)`), as `make test` does",
            returncode=4,
        )
    if shutil.which("bwrap") is None:
        pytest.exit(
            "bubblewrap (bwrap) is not installed and the sandbox tests need it: run "
            "`sudo apt-get install -y bubblewrap` (or `make test`, which installs it "
            "when run as root)",
            returncode=3,
        )


class FakeModelServer:
    """A loopback HTTP server standing in for a model API (OpenAI's or Anthropic's wire format).

    Every POST is recorded in ``requests`` as ``{"path", "headers", "body"}`` (header names in
    lower case) and answered by ``reply(body) -> (status, payload)`` when one is set, else by
    the next queued ``(status, payload)`` of ``responses`` (500 when none is left)."""

    def __init__(self) -> None:
        self.responses: list[tuple[int, dict[str, Any]]] = []
        self.requests: list[dict[str, Any]] = []
        self.reply: Callable[[dict[str, Any]], tuple[int, dict[str, Any]]] | None = None
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(
                    {
                        "path": self.path,
                        "body": body,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                    }
                )
                if fake.reply is not None:
                    status, payload = fake.reply(body)
                else:
                    status, payload = (
                        fake.responses.pop(0)
                        if fake.responses
                        else (500, {"error": "no response queued"})
                    )
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        """the server's root; OpenAI-style clients take ``url + "/v1"``"""
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_model_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeModelServer]:
    """A :class:`FakeModelServer` on loopback, with no proxy or base-URL variable that could
    send a client elsewhere, and test API keys set."""
    for var in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "OPENAI_BASE_URL",
        "ANTHROPIC_BASE_URL",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-anthropic")
    server = FakeModelServer()
    yield server
    server.close()


@pytest.fixture(scope="session")
def benchmark_script() -> Callable[[str], ModuleType]:
    """``benchmark_script("silentbug_ppo_ab")``: that script of ``benchmarks/`` loaded as a
    module (the folder is not a package), for tests of its checks and tables."""
    root = Path(__file__).resolve().parents[1] / "benchmarks"

    def load(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(name, root / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load
