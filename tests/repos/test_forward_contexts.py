"""The sealed channel's two candidate contexts.

Both ends run here as plain subprocesses (no sandbox: this checks what the candidate's code can
observe in each context, not isolation, which ``test_tests_only_forward.py`` covers). A probe
function in a stand-in project reports what a channel-aware defeat device would key on; the two
contexts must differ in each, the ``test`` context must look like a pytest test calling the
function, and a function whose answer follows any of them is caught by the trusted end."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from verigap.repos import forward
from verigap.repos.harness import _verigap_forward as F

HERE = Path(F.__file__).parent

PROBE = """
import os, sys


def probe(x, callback=None):
    f = sys._getframe(1)
    depth = 0
    g = f
    while g is not None:
        depth, g = depth + 1, g.f_back
    print("out", x)
    return {"file": os.path.basename(f.f_code.co_filename), "name": f.f_code.co_name,
            "line": f.f_lineno, "caller_globals": f.f_globals.get("__name__"),
            "cloudpickle": "cloudpickle" in sys.modules,
            "forward_module": any("verigap" in k for k in sys.modules),
            "main": os.path.basename(getattr(sys.modules["__main__"], "__file__", "")),
            "argv0": os.path.basename(sys.argv[0]), "pytest": "pytest" in sys.modules,
            "current_test": os.environ.get("PYTEST_CURRENT_TEST"),
            "hashseed": "PYTHONHASHSEED" in os.environ,
            "cwd_has_tests": os.path.isdir("tests"), "stdout": type(sys.stdout).__name__,
            "safe_path": sys.flags.safe_path, "depth": depth, "x": x}


def honest(x):
    return sorted({str(i) for i in range(x)})
"""


def _start(tree: Path, tmp: Path, context: str) -> tuple[subprocess.Popen, str]:
    """One candidate end, laid out as ``forward.context_end`` lays it out (paths on the host)."""
    scratch = tmp / context
    shutil.copytree(tree, scratch)
    ctx = {"name": context}
    env = {"PATH": os.environ.get("PATH", "")}
    if context == "channel":
        chan = scratch / forward.CHANNEL
        chan.mkdir()
        ctx["cwd"] = forward.CHANNEL
        cmd = [
            sys.executable,
            "-s",
            "-P",
            "-B",
            str(HERE / "_verigap_forward.py"),
            "serve",
            f"{forward.CHANNEL}/cfg.json",
        ]
        env |= {"PYTHONPATH": ".", "PYTHONHASHSEED": "12345"}
    else:  # python -m pytest -q, from a ``pytest`` package of the harness's files
        chan = scratch / forward.TEST_LAUNCH_DIR
        chan.mkdir()
        (chan / "__init__.py").write_text("")
        shutil.copy2(HERE / "_verigap_forward.py", chan / "__main__.py")
        shutil.copytree(Path(__import__("cloudpickle").__file__).parent, chan / "cloudpickle")
        cmd = [sys.executable, "-m", "pytest", "-q"]
    rel = chan.relative_to(scratch).as_posix()
    (chan / "cfg.json").write_text(
        json.dumps(
            {
                "socket": f"{rel}/sock",
                "import_root": ".",
                "accept_timeout": 60,
                "targets": {"p::probe": ["proj", "probe"], "p::honest": ["proj", "honest"]},
                "context": ctx,
            }
        )
    )
    proc = subprocess.Popen(cmd, cwd=scratch, env=env)
    return proc, str(chan / "sock")


@pytest.fixture()
def client(tmp_path):
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    (tree / "proj.py").write_text(PROBE)
    procs, socks = zip(*(_start(tree, tmp_path, c) for c in forward.CONTEXTS), strict=True)
    c = F._Client()
    c.configure({"sockets": list(socks), "root": str(tree), "packages": ["proj"]})
    yield c
    for s in c.socks or ():
        s.close()
    for p in procs:
        p.wait(timeout=30)


def _answers(c: F._Client, target: str, *args) -> list[dict]:
    """Each context's raw answer to one call made from this test function."""
    head = json.dumps(c._where(sys._getframe(1))).encode()
    blob = c._pickle((target, args, {}))
    out = []
    for s in c.connect():
        F.send(s, head)
        F.send(s, blob)
    for s in c.connect():
        out.append(json.loads(F.recv(s)))
    return out


def _value(msg: dict, *args) -> dict:
    resolver = F.Resolver("/nonexistent", [])
    return F.dec(msg["return"], resolver, {f"a{i}": a for i, a in enumerate(args)})


def test_the_two_contexts_differ_in_what_a_device_keys_on(client):
    """channel: the harness calls, grader-like; test: this test function calls, pytest-like."""
    # a lambda argument makes the unpickling need cloudpickle: loaded in both, shown in one
    channel, as_test = (_value(m, 3) for m in _answers(client, "p::probe", 3, lambda: 1))
    line = sys._getframe().f_lineno - 1
    assert channel["file"] == "_verigap_forward.py" and channel["name"] == "invoke"
    assert as_test["file"] == "test_forward_contexts.py"
    assert as_test["name"] == "test_the_two_contexts_differ_in_what_a_device_keys_on"
    assert as_test["line"] == line
    assert as_test["caller_globals"] == "test_forward_contexts"  # this module's stand-in
    assert channel["cloudpickle"] and not as_test["cloudpickle"]
    assert not as_test["forward_module"] and as_test["main"] == "__main__.py"
    assert channel["main"] == "_verigap_forward.py"
    assert as_test["argv0"] == "__main__.py" and channel["argv0"] == "_verigap_forward.py"
    assert as_test["pytest"] and not channel["pytest"]
    assert as_test["current_test"] == os.environ["PYTEST_CURRENT_TEST"]
    assert channel["current_test"] is None
    assert not channel["hashseed"] and not as_test["hashseed"]
    assert as_test["cwd_has_tests"] and not channel["cwd_has_tests"]
    # pytest's fd capture, as while a test of the agent's run is running
    assert as_test["stdout"] == "EncodedFile" and channel["stdout"] == "StringIO"
    assert channel["safe_path"] and not as_test["safe_path"]
    assert as_test["depth"] > channel["depth"] + 10  # the trusted run's stack, replayed
    assert channel["x"] == as_test["x"] == 3


def test_an_answer_that_follows_the_context_is_named_and_fails(client):
    """The probe's answer differs between the contexts: the call fails and is recorded."""
    with pytest.raises(F.CarryError, match="context_dependent"):
        client.call("p::probe", (1,), {})
    assert client.dependent == {"p::probe"}


def test_an_honest_function_agrees_across_contexts(client):
    """Control: the same channel passes a function that does not look around, printed text
    included (the same hash seed in both: a set of strings iterates alike)."""
    assert client.call("p::honest", (12,), {}) == sorted(str(i) for i in range(12))
    assert client.dependent == set()


def test_canonical_ignores_set_order_and_error_wording():
    a = {"return": ["S", [["i", "1"], ["i", "2"]]], "stdout": ""}
    b = {"return": ["S", [["i", "2"], ["i", "1"]]], "stdout": ""}
    assert F.canonical(a) == F.canonical(b)
    assert F.canonical({"error": "x at 0x1"}) == F.canonical({"error": "y at 0x2"})
    assert F.canonical(a) != F.canonical({**a, "stdout": "hi\n"})
    assert F.canonical({"return": ["l", [["i", "1"], ["i", "2"]]]}) != F.canonical(
        {"return": ["l", [["i", "2"], ["i", "1"]]]}
    )  # list order counts


def test_the_test_context_leaves_nothing_of_the_channel_on_disk(client, tmp_path):
    _answers(client, "p::honest", 2)
    assert not (tmp_path / "test" / forward.TEST_LAUNCH_DIR).exists()
    assert not (tmp_path / "test" / forward.CHANNEL).exists()
    assert sorted(p.name for p in (tmp_path / "channel" / forward.CHANNEL).iterdir()) == []
