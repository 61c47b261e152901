import pytest
from textkit import slugify


@pytest.mark.parametrize("text, expected", [
    ("Hello, World!", "hello-world"),
    ("  many   spaces  ", "many-spaces"),
    ("Crème brûlée", "creme-brulee"),
    ("already-a-slug", "already-a-slug"),
    ("", ""),
])
def test_slugify(text, expected):
    assert slugify(text) == expected


def test_custom_separator():
    assert slugify("One Two Three", sep="_") == "one_two_three"


def test_max_len_cuts_at_word_boundary():
    assert slugify("the quick brown fox", max_len=12) == "the-quick"
    assert slugify("the quick brown fox", max_len=15) == "the-quick-brown"


def test_max_len_single_long_word():
    assert slugify("extraordinary", max_len=5) == "extra"
