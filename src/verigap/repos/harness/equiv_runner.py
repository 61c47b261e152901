"""Call functions on pickled inputs and write a canonical, type-tagged encoding of the results.

Usage: python -s -P -B equiv_runner.py CONFIG_JSON   (the grader's own context), or as
``pytest/__main__.py`` started by ``python -m pytest -q`` (the agent-like context; see
:func:`_as_pytest_main`). Runs inside a sandbox, stdlib only.

CONFIG_JSON holds ``import_root``, ``inputs`` (a JSON file: a list of {id, module, qualname,
blob}), ``out`` and ``mode``: ``call`` runs every input; ``expand`` adds generated neighbours
of the captured inputs (small edits to ints, strings and sequences) and writes them as new
inputs. The encoding trusts nothing the result says about itself (:func:`enc`): every value is tagged
by type identity and read through its builtin base type's methods, so an object that claims
to equal anything, or a list subclass that claims to be a list, encodes as what it is. The grader
compares the two encodings in its own process.
"""

from __future__ import annotations

import base64
import collections
import functools
import inspect
import json
import os
import pickle
import signal
import sys
import types

# bound before project code runs (a patched json.dump or os.replace does not reach these)
_dump, _replace = json.dump, os.replace

MAX_ITEMS = 2000
MAX_DEPTH = 12
CALL_TIMEOUT_S = 2.0


_TYPE_DICT = type.__dict__["__dict__"].__get__  # a class's own namespace, never a fake one
_TYPE_NAME = type.__dict__["__qualname__"].__get__
_TYPE_MODULE = type.__dict__["__module__"].__get__
_EXC_ARGS = BaseException.__dict__["args"].__get__

#: Exact builtin types and their fixed tags: a value is one of these only when ``type(x) is``
#: the type itself; a subclass (whatever name it claims) is encoded as a subclass.
_EXACT = {
    list: "builtins.list",
    tuple: "builtins.tuple",
    dict: "builtins.dict",
    set: "builtins.set",
    frozenset: "builtins.frozenset",
}


def tname(t: type) -> str:
    """``module.qualname`` of ``t`` as the class's own namespace records it, marked ``?``
    unless that name leads back to ``t`` itself: a class that claims another's name (a list
    subclass calling itself ``builtins.list``) cannot share its tag."""
    try:
        module, qual = _TYPE_MODULE(t), _TYPE_NAME(t)
    except (TypeError, AttributeError):
        return "?"
    if not isinstance(module, str) or not isinstance(qual, str):
        return "?"
    name = f"{module}.{qual}"
    obj = sys.modules.get(module)
    for part in qual.split("."):
        try:
            obj = inspect.getattr_static(obj, part)
        except AttributeError:
            obj = None
            break
    return name if obj is t else name + "?"


def _has(t: type, name: str) -> bool:
    """Whether a class of ``t``'s real MRO defines ``name`` (no ``__getattr__`` consulted)."""
    return any(name in _TYPE_DICT(c) for c in t.__mro__)


def _base_of(t: type) -> type | None:
    """The builtin container or scalar ``t`` derives from (by its real MRO), or None."""
    for b in t.__mro__:
        if b in _EXACT or b in (int, float, complex, str, bytes, bytearray):
            return b
    return None


def _state(x, t: type, depth: int):
    """The instance's own attributes, read through the real ``__dict__`` slot and the real
    ``__slots__`` members of its classes: never through the object's own ``__getattr__``."""
    out = []
    seen_dict = False
    for c in t.__mro__:
        ns = _TYPE_DICT(c)
        d = ns.get("__dict__")
        if type(d).__name__ == "getset_descriptor" and not seen_dict:
            seen_dict = True
            try:
                state = d.__get__(x)
            except Exception:
                state = None
            if type(state) is dict:
                items = sorted(dict.items(state), key=lambda kv: str(kv[0]))[:MAX_ITEMS]
                out.append(["__dict__", [[enc(k, depth + 1), enc(v, depth + 1)] for k, v in items]])
        slots = ns.get("__slots__", ())
        for s in [slots] if type(slots) is str else slots if type(slots) in (list, tuple) else ():
            member = ns.get(s)
            if type(member).__name__ == "member_descriptor":
                try:
                    out.append([s, enc(member.__get__(x), depth + 1)])
                except AttributeError:
                    out.append([s, ["<unset>"]])
    return out


def _builtin(x, b: type, depth: int):
    """``x`` encoded as a value of the builtin ``b``, read only through ``b``'s own methods."""
    if b is int:
        return ["int", int.__repr__(x)]
    if b is float:
        return ["float", float.__repr__(x)]
    if b is complex:
        return ["complex", complex.__repr__(x)]
    if b is str:
        return ["str", str.__str__(x)]
    if b in (bytes, bytearray):
        return [b.__name__, b.hex(x)]
    if b is dict:
        items = list(dict.items(x))[:MAX_ITEMS]
        return [_EXACT[dict], [[enc(k, depth + 1), enc(v, depth + 1)] for k, v in items]]
    if b in (set, frozenset):
        return [
            _EXACT[b],
            sorted(json.dumps(enc(e, depth + 1)) for e in list(b.__iter__(x))[:MAX_ITEMS]),
        ]
    n = b.__len__(x)
    items = b.__getitem__(x, slice(0, MAX_ITEMS))  # a plain list or tuple, whatever x is
    return [_EXACT[b], [enc(e, depth + 1) for e in items], n]


def enc(x, depth: int = 0):
    """A JSON-able, type-tagged description of ``x`` that trusts nothing ``x`` says about
    itself: types by identity (``type(x) is list``, never a claimed name or ``__class__``),
    contents through the builtin base type's own methods (``list.__getitem__(x, ...)``, never
    ``x``'s), attributes through the real ``__dict__`` and slots. A subclass of a builtin is
    encoded as a subclass (its tag, its builtin value, its state), so it never equals the
    reference's plain builtin; ``x.__eq__`` is only consulted to name an always-equal object."""
    if depth > MAX_DEPTH:
        return ["<deep>"]
    t = type(x)
    if x is None or t is bool:
        return [t.__name__, x]
    if t is int:
        return ["int", x]
    if t is str:
        return ["str", x]
    if t in (float, complex, bytes, bytearray) or t in _EXACT:
        return _builtin(x, t, depth)
    if t is range:
        return ["range", x.start, x.stop, x.step]
    if claims_equal_to_anything(x):
        return ["<eq_any>", tname(t)]
    if issubclass(t, BaseException):
        return ["exc", tname(t), [enc(a, depth + 1) for a in tuple(_EXC_ARGS(x))[:8]]]
    if issubclass(t, type):
        return ["type", tname(x)]
    b = _base_of(t)
    if b is not None:  # a subclass of a builtin: what it is, its builtin value, its state
        return ["subclass", tname(t), _builtin(x, b, depth), _state(x, t, depth)]
    if issubclass(t, collections.deque):
        return [
            "subclass" if t is not collections.deque else "deque",
            tname(t),
            [enc(e, depth + 1) for e in list(collections.deque.__iter__(x))[:MAX_ITEMS]],
        ]
    if t in (types.FunctionType, types.BuiltinFunctionType, types.MethodType):
        return ["callable", getattr(x, "__qualname__", "?")]
    if t is types.GeneratorType or (_has(t, "__next__") and _has(t, "__iter__")):
        out = []
        try:
            for i, e in enumerate(x):
                if i >= MAX_ITEMS:
                    out.append(["<more>"])
                    break
                out.append(enc(e, depth + 1))
        except Exception as e:  # an iterator that fails part way is part of its behaviour
            out.append(["raise", tname(type(e))])
        return ["iter", out]  # what it yields: a generator and a map that yield alike agree
    return [tname(t), _state(x, t, depth)]


class _Stranger:
    """A fresh object nothing legitimate can be equal to."""

    def __eq__(self, other):
        return NotImplemented

    __hash__ = None


def claims_equal_to_anything(x) -> bool:
    """True when ``x == <an object it has never seen>`` is exactly True: an always-equal
    result (the grader names it ``always_eq``; its encoding then never matches the reference)."""
    try:
        return (x == _Stranger()) is True
    except Exception:
        return False


def resolve(module: str, qualname: str):
    obj = __import__(module, fromlist=["_"])
    parts = qualname.split(".")
    for i, part in enumerate(parts):
        if i == len(parts) - 1 and inspect.isclass(obj):
            raw = inspect.getattr_static(obj, part)
            if isinstance(raw, staticmethod | classmethod):
                return raw.__func__
            if isinstance(raw, property):
                return raw.fget
            return raw
        obj = getattr(obj, part)
    return obj


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def call_one(fn, args, kwargs, via=None, timer: bool = True):
    """``fn(*args, **kwargs)``, or ``via(fn, args, kwargs)`` (a replay of the test's frames).
    ``timer``: arm a per-call alarm (the grader's own context); the agent-like context arms
    none (an armed timer is something code can see), and its sandbox's wall limit ends a hang."""
    if timer:
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, CALL_TIMEOUT_S)
    try:
        try:
            result = fn(*args, **kwargs) if via is None else via(fn, args, kwargs)
            encoded = ["ok", enc(result)]
        except _Timeout:
            return ["timeout"]
        except BaseException as e:  # SystemExit (argparse), KeyboardInterrupt: this input only
            encoded = ["raise", tname(type(e))]
        encoded.append(enc(list(args)))  # arguments after the call: in-place effects count
        return encoded
    except _Timeout:
        return ["timeout"]
    except BaseException as e:  # encoding failed (e.g. recursion): this input only
        return ["raise", tname(type(e))]
    finally:
        if timer:
            signal.setitimer(signal.ITIMER_REAL, 0)


def variants(args, kwargs):
    """Small neighbours of one captured call: the boundary cases off-by-one bugs live at."""
    out = []
    for i, a in enumerate(args):
        subs = []
        if type(a) is int:
            subs = [a - 1, a + 1, 0, -a]
        elif type(a) is str:
            subs = [a[:-1], a + a[-1:], a.upper(), ""]
        elif type(a) in (list, tuple):
            subs = [a[:-1], a[1:], a[::-1], type(a)()]
        for s in subs:
            out.append((args[:i] + (s,) + args[i + 1 :], kwargs))
    return out


#: Inputs ``beyond`` mode adds per target at most, and how long the reference may take on one.
BEYOND_PER_TARGET = 12
BEYOND_TIMEOUT_S = 0.5


def _bigger(a, top: int):
    """``a`` grown past ``top`` (the largest magnitude or length recorded at its position),
    keeping its kind: ints past it on both sides of zero, strings and sequences repeated."""
    if type(a) is int:
        return [top + 1, 2 * top + 3, -(top + 1)]
    if type(a) in (str, list, tuple) and len(a):
        return [a * (top // len(a) + 2)]
    return []


def beyond(inputs: list) -> list:
    """Inputs larger than every recorded one, made from the recorded ones: at each argument
    position, ints past the largest recorded magnitude and strings, lists and tuples longer
    than the longest recorded, the other arguments kept. Only those the reference (this
    process's tree) answers within ``BEYOND_TIMEOUT_S`` are kept, at most
    ``BEYOND_PER_TARGET`` per target; the reference decides what the answer is."""
    loaded: dict = {}
    for item in inputs:
        try:
            fn = resolve(item["module"], item["qualname"])
            args, kwargs = pickle.loads(base64.b64decode(item["blob"]))
        except BaseException:
            continue
        loaded.setdefault(item["target"], []).append((item, fn, tuple(args), kwargs))
    out = []
    for target, calls in sorted(loaded.items()):
        top: dict = {}
        for _, _, args, _ in calls:
            for i, a in enumerate(args):
                size = (
                    abs(a) if type(a) is int else len(a) if type(a) in (str, list, tuple) else None
                )
                if size is not None:
                    top[i] = max(top.get(i, 0), min(size, 10**6))
        seen, kept = set(), 0
        for item, fn, args, kwargs in calls:
            for i, a in enumerate(args):
                if i not in top:
                    continue
                for big in _bigger(a, top[i]):
                    new = args[:i] + (big,) + args[i + 1 :]
                    try:
                        blob = pickle.dumps((new, kwargs), protocol=4)
                    except Exception:
                        continue
                    if blob in seen or kept >= BEYOND_PER_TARGET:
                        continue
                    seen.add(blob)
                    fresh_args, fresh_kwargs = pickle.loads(blob)
                    old = CALL_TIMEOUT_S
                    globals()["CALL_TIMEOUT_S"] = BEYOND_TIMEOUT_S
                    try:
                        answer = call_one(fn, fresh_args, fresh_kwargs)
                    finally:
                        globals()["CALL_TIMEOUT_S"] = old
                    if answer[0] == "timeout":
                        continue
                    kept += 1
                    out.append(
                        {
                            **item,
                            "id": f"beyond-{target}-{kept}",
                            "blob": base64.b64encode(blob).decode(),
                            "generated": True,
                            "beyond": True,
                        }
                    )
    return out


def in_context(ctx: dict, run):
    """Run ``run()`` in the observable context ``ctx`` describes (the grader's second context
    looks like the agent's own ``python -m pytest`` in its workspace: pytest imported, another
    argv and working directory, a deeper stack). Code that behaves differently here than in the
    plain context is a defeat device; the grader compares the two outside this process."""
    if ctx.get("cwd"):
        os.chdir(ctx["cwd"])
    if ctx.get("argv"):
        sys.argv[:] = list(ctx["argv"])
    if ctx.get("import_pytest"):
        try:
            import pytest  # noqa: F401
        except Exception:
            pass

    def nest(n: int):
        return run() if n <= 0 else nest(n - 1)

    return nest(int(ctx.get("depth", 0)))


def replayer(root: str):
    """The forwarding channel's ``Replay`` (``_verigap_forward.py``, copied beside this file),
    loaded without an entry in ``sys.modules`` (code under test finds no harness module
    there, as in the agent's own runs)."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_verigap_forward.py")
    spec = importlib.util.spec_from_file_location("_vg_replay", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Replay(root)


#: Modules only this runner imports (a pytest run does not): dropped from ``sys.modules`` in
#: the agent-like context once the inputs are loaded.
RUNNER_ONLY_MODULES = ("pickle", "_pickle", "_compat_pickle", "cloudpickle")


def load_cloudpickle(inputs: list) -> None:
    """Import the ``cloudpickle`` copied beside this runner when an input needs it to load (a
    call captured with the tests' own code by value); before the agent launch deletes it."""
    if not any(b"cloudpickle" in base64.b64decode(item["blob"]) for item in inputs):
        return
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    try:
        import cloudpickle  # noqa: F401
    except Exception:
        pass  # those inputs are then unloadable, and dropped
    finally:
        sys.path.remove(here)


def _dumps(value) -> bytes:
    """``pickle``, or ``cloudpickle`` when it is loaded and pickle cannot (a value that holds
    code that came by value)."""
    try:
        return pickle.dumps(value, protocol=4)
    except Exception:
        cp = sys.modules.get("cloudpickle")
        if cp is None:
            raise
        return cp.dumps(value, protocol=4)


#: The name this runner has when the agent-like context starts it as ``python -m pytest``.
AGENT_LAUNCH = "pytest.__main__"


_KEEP: list = []  # the agent-like context's pytest config, alive until the process ends


def _as_pytest_main() -> None:
    """Make this process look like the agent's own ``python -m pytest -q`` in its workspace.

    The agent context starts ``python -m pytest -q`` with a ``pytest`` package of the runner's
    files first on the path (the command line, ``sys.orig_argv`` and ``/proc/self/cmdline`` are
    then exactly the agent's). Before any project code runs, those files are deleted, the real
    pytest is imported, ``__main__`` becomes a module made from the real ``pytest/__main__.py``
    (its globals as ``python -m pytest`` has them while tests run) and ``sys.argv`` names it."""
    import importlib
    import importlib.util
    import shutil

    here = os.path.dirname(os.path.abspath(__file__))
    shutil.rmtree(here, ignore_errors=True)
    for name in [n for n in sys.modules if n == "pytest" or n.startswith("pytest.")]:
        del sys.modules[name]
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
    spec = importlib.util.find_spec(AGENT_LAUNCH)
    # the interpreter's own __main__ (ModuleType's five names, then __annotations__ and
    # __builtins__), filled as runpy fills it for -m, in the same order
    main_mod = types.ModuleType("__main__")
    main_mod.__annotations__ = {}
    main_mod.__builtins__ = sys.modules["builtins"]
    vars(main_mod).update(
        __name__="__main__",
        __file__=spec.origin,
        __cached__=spec.cached,
        __doc__=None,
        __loader__=spec.loader,
        __package__=spec.parent,
        __spec__=spec,
    )
    main_mod.__name__ = AGENT_LAUNCH  # its ``if __name__ == "__main__"`` must not start pytest
    exec(spec.loader.get_code(AGENT_LAUNCH), vars(main_mod))
    main_mod.__name__ = "__main__"
    sys.modules["__main__"] = main_mod
    sys.argv[:] = [spec.origin, *sys.argv[1:]]
    import pytest

    os.environ["PYTEST_VERSION"] = pytest.__version__  # what pytest.main sets for a run
    try:  # the plugins, options and configure hooks of the agent's run: what it has loaded
        from _pytest.config import _prepareconfig

        config = _prepareconfig(list(sys.argv[1:]))
        config._do_configure()
        _KEEP.append(config)
        # output captured as while a test runs (sys.stdout and fds 1 and 2 on pytest's files)
        config.pluginmanager.getplugin("capturemanager").resume_global_capture()
    except BaseException:  # a project config this environment cannot satisfy: as far as it got
        pass


def main() -> int:
    agent_launch = globals().get("__spec__") is not None and __spec__.name == AGENT_LAUNCH  # noqa: F821 (set by -m)
    cfg_path = (
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "eq.json")
        if agent_launch
        else sys.argv[1]
    )
    with open(cfg_path) as f:
        cfg = json.load(f)
    os.unlink(cfg_path)  # as in pytest_runner: the nonce is never on disk while code runs
    nonce = cfg.pop("nonce", "")
    sys.dont_write_bytecode = True
    if not agent_launch or cfg["import_root"] not in ("", "."):
        sys.path.insert(0, cfg["import_root"])
    out = cfg["out"] if os.path.isabs(cfg["out"]) else os.path.abspath(cfg["out"])
    with open(os.path.abspath(cfg["inputs"])) as f:
        inputs = json.load(f)
    ctx = cfg.get("context") or {}
    # loaded before the runner's files go (the agent launch deletes them)
    replay = (
        replayer(os.getcwd())
        if ctx.get("replay") and any(item.get("caller") for item in inputs)
        else None
    )
    load_cloudpickle(inputs)
    if agent_launch:
        _as_pytest_main()
    results = in_context(ctx, lambda: compute(cfg, inputs, replay, timer=not agent_launch))
    results["nonce"] = nonce
    os.makedirs(os.path.dirname(out), exist_ok=True)
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        _dump(results, f)
    _replace(tmp, out)
    return 0


def compute(cfg: dict, inputs: list, replay=None, timer: bool = True) -> dict:
    results = {}
    if cfg["mode"] == "expand":
        new = []
        seen = set()
        for item in inputs:
            try:
                resolve(item["module"], item["qualname"])
                args, kwargs = pickle.loads(base64.b64decode(item["blob"]))
            except BaseException:
                continue
            for j, v in enumerate([(args, kwargs)] + variants(args, kwargs)):
                try:
                    blob = _dumps(v)
                except Exception:
                    continue
                key = (item["target"], blob)
                if key in seen:
                    continue
                seen.add(key)
                new.append({**item, "blob": base64.b64encode(blob).decode(), "generated": j > 0})
        results = {"inputs": new}
    elif cfg["mode"] == "beyond":
        results = {"inputs": beyond(inputs)}
    else:
        # the agent context calls each captured input as its test did: through a replay of the
        # test's frames, so the direct caller is the test function (file, name, line), with
        # PYTEST_CURRENT_TEST as pytest sets it while that test runs
        as_test = bool((cfg.get("context") or {}).get("replay"))
        loaded = []  # every input loaded first: then the runner's own imports can go
        for item in inputs:
            try:
                fn = resolve(item["module"], item["qualname"])
                args, kwargs = pickle.loads(base64.b64decode(item["blob"]))
                via = None
                if replay is not None and item.get("caller"):
                    via = functools.partial(replay.call, replay.chain(item["caller"]))
            except BaseException as e:  # an import that calls sys.exit loses this input only
                results[str(item["id"])] = ["unloadable", tname(type(e))]
                continue
            loaded.append((item, fn, args, kwargs, via))
        # cloudpickle, whichever the context, once every input is loaded: no run imports it
        for name in [n for n in sys.modules if n.split(".")[0] == "cloudpickle"]:
            sys.modules.pop(name, None)
        if not timer:  # the agent-like context: pytest's own run never imports pickle
            for name in [n for n in sys.modules if n.split(".")[0] in RUNNER_ONLY_MODULES]:
                sys.modules.pop(name, None)
        for item, fn, args, kwargs, via in loaded:
            test = item.get("test") if as_test else None
            if test:
                os.environ["PYTEST_CURRENT_TEST"] = f"{test} (call)"
            results[str(item["id"])] = call_one(fn, args, kwargs, via, timer=timer)
            os.environ.pop("PYTEST_CURRENT_TEST", None)
        results = {"results": results}
    return results


if __name__ == "__main__":
    sys.exit(main())
