import pytest

from verigap.repos import mutate

SRC = '''\
def f(xs, n):
    """doc"""
    total = 0
    for i in range(1, n):
        if xs[i] > 0 and i != 3:
            total = total + xs[i - 1]
        elif xs[i] < 0:
            total -= 1
        else:
            return False
    return g(total, n)[:2]


class C:
    def m(self, a):
        return a * 2
'''


def _mutants(qual):
    ms = mutate.enumerate_mutations("m.py", SRC, [qual])
    return {f"{m.op}:{m.index}": mutate.apply_mutations(SRC, [m]) for m in ms}


def test_every_operator_applies_and_changes_only_its_function():
    muts = _mutants("f")
    ops = {k.split(":")[0] for k in muts}
    assert ops == set(mutate.OPERATORS)
    for text in muts.values():
        assert text != SRC
        assert text.split("class C")[1] == SRC.split("class C")[1]


@pytest.mark.parametrize(
    "op, before, after",
    [
        ("cmp_flip", "xs[i] > 0", "xs[i] >= 0"),
        ("bool_flip", "xs[i] > 0 and i != 3", "xs[i] > 0 or i != 3"),
        ("range_bound", "range(1, n)", "range(1, n - 1)"),
        ("slice_bound", "[:2]", "[:1]"),
        ("arith_swap", "total + xs[i - 1]", "total - xs[i - 1]"),
        ("invert_if", "if xs[i] > 0 and i != 3:", "if not (xs[i] > 0 and i != 3):"),
        ("return_value", "return False", "return True"),
        ("swap_args", "g(total, n)", "g(n, total)"),
    ],
)
def test_operator_examples(op, before, after):
    texts = [t for k, t in _mutants("f").items() if k.startswith(op + ":")]
    assert any(before not in t and after in t for t in texts), texts


def test_drop_else_removes_a_branch():
    texts = [t for k, t in _mutants("f").items() if k.startswith("drop_else:")]
    assert any("elif" not in t for t in texts)
    assert any("else:\n            return False" not in t and "elif" in t for t in texts)


def test_methods_are_addressed_by_qualname():
    assert "C.m" in mutate.functions(SRC)
    (m,) = [m for m in mutate.enumerate_mutations("m.py", SRC, ["C.m"]) if m.op == "arith_swap"]
    assert "return a // 2" in mutate.apply_mutations(SRC, [m])


def test_apply_is_deterministic_and_rejects_stale_addresses():
    ms = mutate.enumerate_mutations("m.py", SRC, ["f"])
    assert [mutate.apply_mutations(SRC, [m]) for m in ms] == [
        mutate.apply_mutations(SRC, [m]) for m in ms
    ]
    with pytest.raises(ValueError):
        mutate.apply_mutations(SRC, [mutate.Mutation("m.py", "f", "cmp_flip", 99)])
