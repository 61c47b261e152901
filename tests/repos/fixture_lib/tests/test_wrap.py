import pytest
from textkit import truncate, wrap


def test_wrap_basic():
    assert wrap("the quick brown fox jumps", 10) == ["the quick", "brown fox", "jumps"]


def test_wrap_exact_width():
    assert wrap("aaaa bbbb", 9) == ["aaaa bbbb"]
    assert wrap("aaaa bbbb", 8) == ["aaaa", "bbbb"]


def test_wrap_long_word_alone():
    assert wrap("a verylongword b", 4) == ["a", "verylongword", "b"]


def test_wrap_empty_and_bad_width():
    assert wrap("   ", 5) == []
    with pytest.raises(ValueError):
        wrap("x", 0)


def test_truncate():
    assert truncate("hello world", 20) == "hello world"
    assert truncate("hello world", 11) == "hello world"
    assert truncate("hello world", 8) == "hello..."
    assert truncate("hello world", 3) == "..."
    assert truncate("hello world", 7, ellipsis="~") == "hello~"
