"""The comparison's encoder trusts nothing a result says about itself: not its claimed type
name, not its ``__class__``, not its own ``__len__``/``__getitem__``/``__iter__``/``items``,
not a ``__dict__`` property. Each hostile value is set beside the honest value it imitates:
the two must encode differently, and the honest one as the plain builtin does."""

from __future__ import annotations

import collections
import json

from verigap.repos.harness import equiv_runner as E


def _same(a, b) -> bool:
    return json.dumps(E.enc(a)) == json.dumps(E.enc(b))


class _LooksLikeList(list):
    """Holds broken items; answers ``len``, slicing, iteration and ``==`` like [1, 2, 3]."""

    __qualname__ = "list"
    __module__ = "builtins"
    __hash__ = None

    def __len__(self):
        return 3

    def __getitem__(self, i):
        return [1, 2, 3][i]

    def __iter__(self):
        return iter([1, 2, 3])

    def __eq__(self, other):
        return list.__eq__([1, 2, 3], other)

    @property
    def __class__(self):
        return list


def test_a_list_subclass_claiming_to_be_list_is_encoded_as_what_it_holds():
    fake = _LooksLikeList([9, 9, 9])
    assert fake == [1, 2, 3] and len(fake) == 3 and isinstance(fake, list)  # it does lie
    assert not _same(fake, [1, 2, 3])
    got = E.enc(fake)
    assert got[0] == "subclass" and got[1].endswith("?")  # its claimed name is not believed
    assert got[2] == ["builtins.list", [["int", 9], ["int", 9], ["int", 9]], 3]
    assert _same([1, 2, 3], [1, 2, 3])  # the control


def test_an_honest_list_subclass_still_differs_from_a_plain_list():
    class Items(list):
        pass

    assert not _same(Items([1, 2]), [1, 2])
    assert not _same((1, 2), [1, 2])


def test_a_dict_subclass_with_lying_items_is_read_through_dict():
    class D(dict):
        def items(self):
            return [("a", 1)]

        def __iter__(self):
            return iter(["a"])

        def __len__(self):
            return 1

    d = D(a=2)
    assert E.enc(d)[2] == ["builtins.dict", [[["str", "a"], ["int", 2]]]]
    assert not _same(d, {"a": 1})


def test_scalar_and_set_subclasses_are_read_through_their_base():
    class S(str):
        def __str__(self):
            return "right"

    class I(int):  # noqa: E742
        def __repr__(self):
            return "1"

    class F(frozenset):
        def __iter__(self):
            return iter([1])

    assert E.enc(S("wrong"))[2] == ["str", "wrong"]
    assert E.enc(I(2))[2] == ["int", "2"]
    assert E.enc(F({2}))[2] == ["builtins.frozenset", [json.dumps(["int", 2])]]
    assert not _same(S("right"), "right") and not _same(I(1), 1)


def test_attributes_come_from_the_real_instance_dict():
    class Box:
        def __init__(self, v):
            self.v = v

    class Liar(Box):
        @property
        def __dict__(self):
            return {"v": 1}

        def __getattr__(self, name):
            return 1

    assert not _same(Liar(5), Box(1))
    assert E.enc(Liar(5))[1] == [["__dict__", [[["str", "v"], ["int", 5]]]]]


def test_a_class_claiming_another_class_name_is_marked():
    class OrderedDict(dict):
        __module__ = "collections"
        __qualname__ = "OrderedDict"

    assert E.tname(collections.OrderedDict) == "collections.OrderedDict"
    assert E.tname(OrderedDict) == "collections.OrderedDict?"
    assert not _same(OrderedDict(a=1), collections.OrderedDict(a=1))


def test_deques_and_exceptions_carry_their_contents():
    assert not _same(collections.deque([1]), collections.deque([2]))

    class Err(ValueError):
        @property
        def args(self):
            return ("fine",)

    assert E.enc(Err("broken"))[2] == [["str", "broken"]]


def _item(target: str, module: str, qualname: str, args: tuple, n: int) -> dict:
    import base64
    import pickle

    return {
        "id": n,
        "target": target,
        "module": module,
        "qualname": qualname,
        "blob": base64.b64encode(pickle.dumps((args, {}), protocol=4)).decode(),
    }


def test_beyond_makes_inputs_past_every_recorded_size(tmp_path, monkeypatch):
    """Generated inputs grow each argument past the largest recorded at its position (ints on
    both sides of zero, strings and lists repeated), keep the rest, and drop the ones the
    reference cannot answer in time."""
    import base64
    import pickle

    (tmp_path / "beyond_probe_mod.py").write_text(
        "import time\n"
        "def pad(n, s):\n    return s * n\n"
        "def slow(n):\n    if n > 100:\n        time.sleep(5)\n    return n\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    inputs = [
        _item("m::pad", "beyond_probe_mod", "pad", (3, "ab"), 0),
        _item("m::pad", "beyond_probe_mod", "pad", (5, "xyz"), 1),
        _item("m::slow", "beyond_probe_mod", "slow", (60,), 2),
    ]
    made = E.beyond(inputs)
    pads = [pickle.loads(base64.b64decode(x["blob"]))[0] for x in made if x["target"] == "m::pad"]
    assert all(x["generated"] and x["beyond"] for x in made)
    assert (6, "ab") in pads and (13, "ab") in pads and (-6, "ab") in pads
    assert (3, "ab" * 3) in pads and (5, "xyz" * 3) in pads  # longer than 3 characters
    assert all(abs(n) > 5 or len(s) > 3 for n, s in pads)
    assert len(pads) <= E.BEYOND_PER_TARGET
    # slow(123) takes 5 s in the reference: not kept; slow(61) and slow(-61) are
    slow = [pickle.loads(base64.b64decode(x["blob"]))[0] for x in made if x["target"] == "m::slow"]
    assert slow == [(61,), (-61,)]
    assert len({x["id"] for x in made}) == len(made)
