import pytest

from verigap.errors import ConfigError
from verigap.sandbox import Limits
from verigap.sandbox._exec import _Capture
from verigap.sandbox._limits import classify, terminating_signal


def test_limits_are_frozen_and_validated() -> None:
    lim = Limits()
    with pytest.raises(AttributeError):
        lim.wall_s = 1.0  # type: ignore[misc]
    with pytest.raises(ConfigError, match="memory_mb"):
        Limits(memory_mb=0)
    assert Limits(cpu_s=2.4).rlimits()["RLIMIT_CPU"] == 2
    assert "RLIMIT_CPU" not in Limits().rlimits()
    assert Limits(memory_mb=100).rlimits()["RLIMIT_AS"] == 100 * 1024 * 1024


def test_terminating_signal_reads_popen_and_shell_conventions() -> None:
    assert terminating_signal(-9) == 9
    assert terminating_signal(128 + 24) == 24
    assert terminating_signal(1) is None
    assert terminating_signal(None) is None


def test_classify_names_the_limit() -> None:
    lim = Limits(cpu_s=3, memory_mb=64, processes=8, file_size_mb=2)
    kw = {"timed_out": False, "timeout": 5.0, "truncated": False}
    assert classify(0, "", lim, **kw) is None
    assert classify(1, "assert failed", lim, **kw) is None
    assert "CPU time limit of 3" in classify(152, "", lim, **kw)
    assert "file size limit of 2 MB" in classify(-25, "", lim, **kw)
    assert "memory limit of 64 MB" in classify(1, "MemoryError", lim, **kw)
    assert "process limit of 8" in classify(0, "sh: Cannot fork", lim, **kw)
    timed = classify(None, "", lim, timed_out=True, timeout=5.0, truncated=True)
    assert "wall-clock limit of 5s" in timed and "truncated" in timed


def test_capture_keeps_head_and_tail_with_a_marker() -> None:
    cap = _Capture(limit=10)
    for chunk in [b"ABCDE", b"x" * 1000, b"VWXYZ"]:
        cap.add(chunk)
    text = cap.text("stdout")
    assert cap.truncated
    assert text.startswith("ABCDE") and text.endswith("VWXYZ")
    assert "[... verigap: 1000 bytes of stdout omitted ...]" in text
    small = _Capture(limit=10)
    small.add(b"0123456789")
    assert not small.truncated and small.text("stdout") == "0123456789"
