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
