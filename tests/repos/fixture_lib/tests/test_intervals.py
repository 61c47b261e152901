from textkit import merge, overlaps, total_length


def test_overlaps():
    assert overlaps((0, 5), (4, 8))
    assert not overlaps((0, 5), (5, 8))
    assert overlaps((2, 3), (0, 10))
    assert not overlaps((6, 9), (0, 2))


def test_merge():
    assert merge([(5, 8), (0, 2), (1, 3)]) == [(0, 3), (5, 8)]
    assert merge([(0, 2), (2, 4)]) == [(0, 4)]
    assert merge([(0, 10), (2, 3)]) == [(0, 10)]
    assert merge([(3, 3), (4, 2)]) == []


def test_total_length():
    assert total_length([(0, 2), (1, 5), (10, 11)]) == 6
    assert total_length([]) == 0
