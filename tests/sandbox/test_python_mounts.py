"""The sandbox shows the Python install it runs only at /run/verigap/python,
with an interpreter whose absolute RUNPATH for libpython is rewritten relative to itself."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from verigap.sandbox import _python, make_sandbox
from verigap.sandbox._base import base_python

BASE = Path(sys.base_prefix).resolve()
EXE = Path(base_python()).resolve()
ON_USR = BASE.is_relative_to("/usr")  # part of the OS: shown as it is, nothing to hide


def _runpath(path: Path) -> list[bytes]:
    return [v for _, v in _python._runpaths(path.read_bytes())]


def test_runpath_reader_agrees_with_readelf():
    if shutil.which("readelf") is None:
        pytest.skip("readelf (binutils) is not installed")
    out = subprocess.run(["readelf", "-d", str(EXE)], capture_output=True, text=True).stdout
    want = [
        line.split("[", 1)[1].rstrip("]").encode()
        for line in out.splitlines()
        if "(RUNPATH)" in line or "(RPATH)" in line
    ]
    assert _runpath(EXE) == want


def test_relocation_rewrites_entries_into_the_install_and_refuses_what_does_not_fit():
    into = [v for v in _runpath(EXE) if Path(v.decode()).resolve().is_relative_to(BASE)]
    if not into:
        pytest.skip("this interpreter finds libpython without an absolute RUNPATH into its install")
    data = EXE.read_bytes()
    new = _python._relocated(data, EXE.parent, BASE)
    assert new is not None and len(new) == len(data)
    after = [v for _, v in _python._runpaths(new)]
    assert any(v.startswith(b"$ORIGIN/") for v in after)
    assert not any(BASE.as_posix().encode() in v for v in after)
    # seen from a directory deep enough, "$ORIGIN/../../...": longer than the entry, refused
    deep = BASE.joinpath(*["d"] * 20)
    assert _python._relocated(data, deep, BASE) is None
    assert _python._relocated(b"#!/bin/sh\n", EXE.parent, BASE) == b"#!/bin/sh\n"


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
@pytest.mark.skipif(ON_USR, reason="the install is under /usr, shown as part of the OS")
def test_the_install_shows_only_at_its_neutral_path(tmp_path, monkeypatch):
    monkeypatch.setenv("VERIGAP_CACHE", str(tmp_path / "cache"))
    ws = tmp_path / "ws"
    ws.mkdir()
    code = (
        "import os, sys, ssl, sqlite3; print(sys.base_prefix, os.path.realpath(sys.executable)); "
        f"print(os.path.exists({str(BASE)!r}), {str(BASE)!r} in open('/proc/self/maps').read())"
    )
    res = make_sandbox(ws).exec(["python", "-c", code])
    assert res.returncode == 0, res.stderr
    first, second = res.stdout.splitlines()
    assert first == f"/run/verigap/python /run/verigap/python/{EXE.relative_to(BASE)}"
    assert second == "False False"
    # a virtualenv bound at its host path links to the install there: then it is shown there too
    if sys.prefix != sys.base_prefix:
        res = make_sandbox(ws, ro_binds=[Path(sys.prefix)]).exec([sys.executable, "-c", code])
        assert res.returncode == 0, res.stderr
        assert res.stdout.splitlines()[1].startswith("True")
