"""What the sealed channel carries beyond plain data: standard-library value types,
a defaultdict's factory, classes the test itself passes (toolz's ``factory=CustomMapping``), and
non-generator iterators as results (toolz's ``sliding_window`` returns a ``zip``). Each was a
real toolz site's tests failing on the reference through the channel
(``results/redteam/v2_carries_toolz.json``); the decoder still builds them without running
candidate code, and refuses anything else."""

from __future__ import annotations

import collections
import datetime
import decimal
import fractions
import io
import json
import pathlib
import uuid

import pytest

from verigap.repos.harness import _verigap_forward as F


class Box:  # a class of a test module in the reference tree (this file stands for the tree)
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return type(other) is Box and other.v == self.v


class TestDefaultDict(collections.defaultdict):  # toolz's test_dicttoolz.defaultdict
    __test__ = False


class OD(collections.OrderedDict):
    pass


def _resolver(packages=("other",)):
    """This file's directory is the reference tree; by default it is no project package, so
    its classes are a test module's."""
    return F.Resolver(__file__.rsplit("/", 1)[0], list(packages))


def _round(x, args=None, r=None):
    return F.dec(json.loads(json.dumps(F.enc(x))), r or _resolver(), args)


def test_stdlib_values_cross_with_their_exact_type_and_value():
    od = collections.OrderedDict([("b", 1), ("a", [2])])
    values = [
        od,
        collections.Counter("abca"),
        collections.deque([1, 2], maxlen=3),
        decimal.Decimal("1.10"),
        decimal.Decimal("-NaN"),
        fractions.Fraction(-3, 4),
        datetime.timedelta(days=-1, seconds=5, microseconds=7),
        datetime.date(2024, 2, 29),
        datetime.time(1, 2, 3, 4, tzinfo=datetime.UTC, fold=1),
        datetime.datetime(
            2024, 1, 2, 3, 4, 5, 6, tzinfo=datetime.timezone(datetime.timedelta(hours=-5), "EST")
        ),
        datetime.datetime(2024, 1, 2),
        pathlib.PurePosixPath("a/b.txt"),
        pathlib.Path("/x/y"),
        uuid.UUID(int=12345),
    ]
    for x in values:
        back = _round(x)
        assert type(back) is type(x) and back is not x, x
        if isinstance(x, decimal.Decimal) and x.is_nan():
            assert str(back) == str(x)
        else:
            assert back == x and str(back) == str(x), x
    back = _round(od)
    assert list(back) == ["b", "a"]
    back.move_to_end("b")  # the order bookkeeping is intact
    assert list(back) == ["a", "b"]
    assert _round(collections.deque([1, 2], maxlen=3)).maxlen == 3
    tz = _round(
        datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=-5), "EST"))
    ).tzinfo
    assert tz.tzname(None) == "EST"
    assert _round(datetime.time(1, fold=1)).fold == 1


def test_a_defaultdict_keeps_its_factory():
    d = collections.defaultdict(list, {1: [2]})
    back = _round(d)
    assert type(back) is collections.defaultdict and back == d
    assert back.default_factory is list and back["new"] == []
    assert _round(collections.defaultdict(None)).default_factory is None


def test_stdlib_values_decode_without_running_anything_else():
    r = _resolver()
    for bad in (
        ["v", "os.system", "ls"],
        ["v", "subprocess.Popen", ["ls"]],
        ["v", "collections.defaultdict", [["T", ["os", "system"]], []]],
        ["v", "collections.defaultdict", [["s", "not a class"], []]],
        ["v", "datetime.datetime", [2024, 1, 1, 0, 0, 0, 0, ["s", "tz"], 0]],
    ):
        with pytest.raises(F.CarryError):
            F.dec(bad, r)
    with pytest.raises(F.CarryError):  # a factory that is a function cannot cross
        F.enc(collections.defaultdict(lambda: 0))

    class Zone(datetime.tzinfo):
        def utcoffset(self, dt):
            return datetime.timedelta(0)

    with pytest.raises(F.CarryError):  # only fixed-offset zones cross
        F.enc(datetime.datetime(2024, 1, 1, tzinfo=Zone()))


def test_a_class_the_test_passes_may_come_back_and_no_other():
    """``valfilter(f, d, factory=CustomMapping)``: the answer is an object of the test's class.
    The decoder takes the class from the call's own arguments (a class, or an argument's
    type, also inside containers), defined in the reference tree; nothing else."""
    r = _resolver()
    msg = json.loads(json.dumps(F.enc(Box(3))))
    with pytest.raises(F.CarryError):  # a test module's class the call was not given
        F.dec(msg, r)
    with pytest.raises(F.CarryError):
        F.dec(msg, r, {"a0": OD})
    for args in ({"a0": Box}, {"kfactory": Box}, {"a0": [1, {"k": Box(1)}]}):
        back = F.dec(msg, r, args)
        assert type(back) is Box and back == Box(3)
    assert F.dec(["T", [__name__, "Box"]], r, {"a0": Box}) is Box
    with pytest.raises(F.CarryError):  # a class from outside the tree, even when passed
        F.dec(["o", ["collections", "UserDict"], None, []], r, {"a0": collections.UserDict})
    assert Box in F._classes_in([[Box(1)]], r.root) and collections.UserDict not in F._classes_in(
        [collections.UserDict], r.root
    )


def test_a_defaultdict_subclass_keeps_its_factory_and_an_ordered_dict_its_order():
    d = TestDefaultDict(int, {1: 2})
    back = _round(d, {"a0": d})
    assert type(back) is TestDefaultDict and back == {1: 2} and back is not d
    assert back.default_factory is int and back[5] == 0
    od = OD([("z", 1), ("y", 2)])
    back = _round(od, {"a0": od})
    assert type(back) is OD and list(back) == ["z", "y"]
    back.move_to_end("z")
    assert list(back) == ["y", "z"]


def _answer(fn, *args):
    import cloudpickle

    globals()["_fn"] = fn
    try:
        return json.loads(
            json.dumps(F.answer({"t": (__name__, "_fn")}, cloudpickle.dumps(("t", args, {}))))
        )
    finally:
        del globals()["_fn"]


def test_an_iterator_result_is_run_there_and_replayed_here():
    msg = _answer(lambda s: zip(s, s[1:], strict=False), [1, 2, 3])
    r = _resolver()
    assert [F.dec(x, r) for x in msg["generator"]] == [(1, 2), (2, 3)]
    msg = _answer(lambda n: map(lambda i: 10 // i, range(n, -1, -1)), 2)
    assert [F.dec(x, r) for x in msg["generator"]] == [5, 10]
    assert type(F.dec(msg["raise"], r)) is ZeroDivisionError  # how it ended, replayed
    # an iterator the test passed comes back as that argument, not drained
    assert _answer(lambda it: it, iter([1, 2]))["return"] == ["arg", "a0"]
    # a file is no iterator to drain: it cannot cross
    assert "cannot cross" in _answer(lambda: io.StringIO("a\nb\n"))["error"]
    assert (
        F.replayable(map(str, []))
        and F.replayable(x for x in ())
        and not F.replayable([1])
        and not F.replayable(io.StringIO())
    )
