"""The self-check every sandbox backend must pass (bwrap and the unsafe local backend)."""

import os
import time
from pathlib import Path

import pytest

from verigap.sandbox import PathOutsideWorkspace


def test_runs_in_the_workspace_and_reports_exit_codes(make_box, backend: str) -> None:
    box = make_box(backend)
    ok = box.exec("cat README.txt; echo err >&2")
    assert (ok.returncode, ok.stdout, ok.stderr, ok.ok, ok.reason) == (
        0,
        "hello\n",
        "err\n",
        True,
        None,
    )
    bad = box.exec(["/bin/sh", "-c", "exit 3"])
    assert (bad.returncode, bad.ok, bad.timed_out, bad.reason) == (3, False, False, None)
    missing = box.exec(["no-such-program-xyz"])
    assert missing.returncode == 127 and "no-such-program-xyz" in missing.stderr
    assert "No such file or directory" in missing.stderr


def test_python_is_available_and_cwd_is_honoured(make_box, backend: str) -> None:
    box = make_box(backend)
    r = box.exec("python -c 'from calc import add; print(add(2, 3))'", cwd="pkg")
    assert r.stdout == "-1\n", r.stderr
    with pytest.raises(PathOutsideWorkspace):
        box.exec("pwd", cwd="..")
    with pytest.raises(ValueError, match="not a directory"):
        box.exec("pwd", cwd="README.txt")


def test_the_callers_environment_does_not_leak(make_box, backend: str, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    box = make_box(backend)
    r = box.exec("env", env={"EXTRA": "yes"})
    assert "sk-must-not-leak" not in r.stdout
    assert "EXTRA=yes" in r.stdout and "HOME=/tmp" in r.stdout


def test_files_round_trip_between_host_and_commands(make_box, backend: str) -> None:
    box = make_box(backend)
    box.write_file("new/dir/f.txt", "from host\n")
    r = box.exec("cat new/dir/f.txt && echo more >> new/dir/f.txt && echo c > new/dir/g.txt")
    assert r.ok and r.stdout == "from host\n", r.stderr
    assert box.read_file("new/dir/f.txt") == "from host\nmore\n"
    assert box.read_file(f"{box.workdir}/new/dir/g.txt") == "c\n"
    for bad in ["../escape.txt", "/etc/passwd"]:
        with pytest.raises(PathOutsideWorkspace):
            box.write_file(bad, "x")
        with pytest.raises(PathOutsideWorkspace):
            box.read_file(bad)
    assert not (box.root.parent / "escape.txt").exists()


def test_wall_clock_kills_the_whole_process_tree(make_box, backend: str) -> None:
    box = make_box(backend)
    cmd = "(while true; do date +%s%N > beat; sleep 0.05; done) & sleep 60"
    r = box.exec(cmd, timeout=1.0)
    assert r.timed_out and r.returncode is None and not r.ok
    assert "wall-clock limit of 1s" in r.reason
    assert r.wall_s < 10
    before = (box.root / "beat").read_text()
    time.sleep(0.4)
    assert (box.root / "beat").read_text() == before  # the background loop is dead


def test_background_children_do_not_outlive_a_normal_exit(make_box, backend: str) -> None:
    box = make_box(backend)
    r = box.exec("(sleep 1; echo late > late.txt) & echo started")
    assert r.ok and r.stdout == "started\n"
    assert r.wall_s < 5
    time.sleep(1.3)
    assert not (box.root / "late.txt").exists()


def test_infinite_loop_hits_the_cpu_limit(make_box, backend: str) -> None:
    box = make_box(backend, cpu_s=1)
    r = box.exec("python -c 'while True: pass'", timeout=20)
    assert not r.ok and not r.timed_out
    assert "CPU time limit of 1s" in r.reason


def test_memory_hog_is_refused(make_box, backend: str) -> None:
    box = make_box(backend, memory_mb=256)
    r = box.exec("python -c 'x = bytearray(1024 * 1024 * 1024); print(len(x))'")
    assert not r.ok and r.stdout == ""
    assert "memory limit of 256 MB" in r.reason
    assert box.exec("python -c 'x = bytearray(16 * 1024 * 1024); print(len(x))'").ok


def test_file_size_limit(make_box, backend: str) -> None:
    box = make_box(backend, file_size_mb=1)
    r = box.exec("head -c 3000000 /dev/zero > big")
    assert not r.ok and "file size limit of 1 MB" in r.reason
    assert os.path.getsize(box.root / "big") <= 1024 * 1024


def test_100mb_print_is_capped_with_a_visible_marker(make_box, backend: str) -> None:
    box = make_box(backend, output_bytes=2000)
    code = "import sys; w = sys.stdout.write; w('BEGIN'); [w('x' * 1_000_000) for _ in range(100)]; w('END')"
    r = box.exec(["python", "-c", code])
    assert r.ok and r.truncated
    assert r.stdout.startswith("BEGIN") and r.stdout.endswith("END")
    assert "bytes of stdout omitted" in r.stdout
    assert len(r.stdout) < 2200
    assert "output truncated to 2000 bytes" in r.reason


def test_large_output_from_a_file_does_not_block(make_box, backend: str, tmp_path: Path) -> None:
    box = make_box(backend, output_bytes=1000)
    r = box.exec("seq 1 200000; seq 1 200000 >&2")
    assert r.ok and r.truncated
    assert r.stdout.endswith("200000\n") and r.stderr.endswith("200000\n")


def test_a_same_size_edit_in_the_same_second_is_not_hidden_by_bytecode(
    make_box, backend: str
) -> None:
    box = make_box(backend)
    assert box.exec("python -c 'from pkg.calc import add; print(add(2, 3))'").stdout == "-1\n"
    box.write_file("pkg/calc.py", "def add(a, b):\n    return a + b\n")  # same size
    assert box.exec("python -c 'from pkg.calc import add; print(add(2, 3))'").stdout == "5\n"
    assert not (box.root / "pkg" / "__pycache__").exists()


def test_python_in_commands_is_verigaps_interpreter(make_box, backend: str) -> None:
    import sys

    box = make_box(backend)
    want = f"{sys.version_info[0]}.{sys.version_info[1]}"
    for exe in ("python", "python3"):
        r = box.exec([exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        assert r.stdout == want + "\n", (exe, r.stderr)
