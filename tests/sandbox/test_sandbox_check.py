import os
import shutil

import pytest
from typer.testing import CliRunner

from verigap.cli import app
from verigap.sandbox import Check, _bwrap, self_check

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed"
)


@needs_bwrap
def test_every_promise_holds_under_bwrap() -> None:
    results = self_check("bwrap")
    assert len(results) == 9
    assert [c.name for c in results if not c.passed] == []


def test_the_unsafe_backend_is_shown_to_isolate_nothing() -> None:
    failed = {c.name for c in self_check("unsafe") if not c.passed}
    expected = {
        "network: host loopback unreachable",
        "files outside the workspace invisible",
        "writes outside the workspace fail",
    }
    if os.geteuid() == 0:
        expected |= {"commands run unprivileged", "process limit holds a fork bomb"}
    assert failed == expected


def test_cli_check_exit_code_follows_the_rows(monkeypatch) -> None:
    import verigap.sandbox._check as check_mod

    rows = [Check("a", True, "fine"), Check("b", True, "fine")]
    monkeypatch.setattr(check_mod, "self_check", lambda backend: rows)
    result = CliRunner().invoke(app, ["sandbox", "check"])
    assert result.exit_code == 0 and "all 2 checks passed" in result.output
    rows[1] = Check("b", False, "leaked")
    result = CliRunner().invoke(app, ["sandbox", "check", "--backend", "unsafe"])
    assert result.exit_code == 1 and "1 of 2 checks failed" in result.output
    assert "leaked" in result.output


def test_cli_check_says_how_to_install_bwrap(monkeypatch) -> None:
    monkeypatch.setattr(_bwrap.shutil, "which", lambda name: None)
    result = CliRunner().invoke(app, ["sandbox", "check"])
    assert result.exit_code == 2
    text = " ".join(result.output.split())  # rich wraps long lines
    assert text.startswith("error:") and "apt-get install -y bubblewrap" in text


def test_cli_check_persistent_flag_reaches_self_check(monkeypatch) -> None:
    import verigap.sandbox._check as check_mod

    seen = []

    def fake(backend, persistent=False):
        seen.append((backend, persistent))
        return [Check("a", True, "fine")]

    monkeypatch.setattr(check_mod, "self_check", fake)
    assert CliRunner().invoke(app, ["sandbox", "check", "--persistent"]).exit_code == 0
    assert CliRunner().invoke(app, ["sandbox", "check"]).exit_code == 0
    assert seen == [("bwrap", True), ("bwrap", False)]
