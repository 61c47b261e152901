import pytest
from textkit import clamp, human_size, ordinal, parse_ranges


@pytest.mark.parametrize("n, expected", [
    (1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"), (12, "12th"),
    (13, "13th"), (21, "21st"), (22, "22nd"), (101, "101st"), (111, "111th"), (0, "0th"),
])
def test_ordinal(n, expected):
    assert ordinal(n) == expected


def test_clamp():
    assert clamp(5, 0, 10) == 5
    assert clamp(-1, 0, 10) == 0
    assert clamp(11, 0, 10) == 10
    assert clamp(10, 0, 10) == 10
    with pytest.raises(ValueError):
        clamp(1, 2, 0)


@pytest.mark.parametrize("n, expected", [
    (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"),
    (1048576, "1.0 MiB"), (5 * 1024 ** 4, "5.0 TiB"), (3 * 1024 ** 5, "3072.0 TiB"),
])
def test_human_size(n, expected):
    assert human_size(n) == expected


def test_human_size_negative():
    with pytest.raises(ValueError):
        human_size(-1)


def test_parse_ranges():
    assert parse_ranges("1,3-5,9") == [1, 3, 4, 5, 9]
    assert parse_ranges(" 2 , ,7-7") == [2, 7]
    assert parse_ranges("") == []


def test_parse_ranges_reversed():
    with pytest.raises(ValueError):
        parse_ranges("5-3")
