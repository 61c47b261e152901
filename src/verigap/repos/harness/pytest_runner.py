"""Run pytest with a reporting plugin and write one JSON report (runs inside the sandbox).

Usage: python -s -P -B pytest_runner.py CONFIG_JSON

CONFIG_JSON (a file, deleted as soon as it is read) holds a ``nonce`` echoed in the report
(so a report forged by code under test, which never sees the config, is told apart), ``import_root`` (prepended to sys.path so the project under test is
imported from the tree being graded, not from the environment), ``out`` (report path),
``pytest_args``, and optionally ``reach`` (record which project functions each test calls) and
``capture`` (pickle the arguments of named functions as the tests call them), and
``forward`` (the tree is the reference with its mutated functions decorated to call a candidate
process: ``_verigap_forward``).

The report holds every test id with its outcome (passed, failed, error, skipped, xfailed,
xpassed), pytest's exit code, and what the optional modes recorded.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import threading

# Bound before any project code runs: code under test that replaces json.dump, open or
# os._exit (to rewrite this report on its way to disk) does not reach the copies used here.
_dump, _open, _replace, _exit = json.dump, open, os.replace, os._exit
_PID = os.getpid()  # the process this runner started as (a fork at import runs on elsewhere)

CO_GENERATOR = 0x20
CO_VARARGS = 0x04
CO_VARKEYWORDS = 0x08


class Report:
    """Collects outcomes per test id from pytest's hooks."""

    def __init__(self) -> None:
        self.outcomes: dict[str, str] = {}
        self.durations: dict[str, float] = {}
        self.collect_errors: list[str] = []
        self.current: str = "<collect>"
        self.session = None
        self.session_type: type | None = None
        self.plugins_at_start: set[int] = set()

    def pytest_sessionstart(self, session):
        self.session, self.session_type = session, type(session)
        self.plugins_at_start = {id(p) for p in session.config.pluginmanager.get_plugins()}

    def foreign_plugins(self, root: str = "\0") -> list[str]:
        """Plugin objects registered during the run that are neither modules (conftest files,
        pytest's own) nor pytest's internal objects: code under test hooking the run itself.
        A class whose code comes from the project (under ``root``) is exempt only when it is
        defined in a conftest file pytest registered as a plugin (the project's own, pristine
        in a graded tree); a class that merely names its module ``conftest`` is not."""
        if self.session is None:
            return []
        plugins = self.session.config.pluginmanager.get_plugins()
        conftest_files = {
            getattr(m, "__file__", None)
            for m in plugins
            if type(m).__name__ == "module" and m.__name__.rsplit(".", 1)[-1] == "conftest"
        } - {None}
        out = []
        for p in plugins:
            if id(p) in self.plugins_at_start or type(p).__name__ == "module":
                continue
            mod = type(p).__module__ or ""
            code_file = _class_file(type(p))
            if code_file is not None and code_file in conftest_files:
                continue
            from_project = code_file is not None and code_file.startswith(root)
            if from_project or not mod.startswith(("_pytest", "pytest", "pluggy")):
                out.append(f"plugin {mod}.{type(p).__qualname__}")
        return out

    def pytest_runtest_logstart(self, nodeid, location):
        self.current = nodeid

    def pytest_runtest_logfinish(self, nodeid, location):
        self.current = "<between>"

    def pytest_collectreport(self, report):
        if report.failed:
            self.collect_errors.append(report.nodeid)

    def pytest_runtest_logreport(self, report):
        nid = report.nodeid
        self.durations[nid] = self.durations.get(nid, 0.0) + float(report.duration)
        prev = self.outcomes.get(nid)
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        elif report.when == "call":
            outcome = report.outcome  # passed / failed / skipped
        elif report.failed:
            outcome = "error"
        elif report.skipped:
            outcome = "skipped"
        else:
            outcome = "passed"
        # the worst outcome over setup/call/teardown wins
        rank = {"passed": 0, "xpassed": 1, "skipped": 2, "xfailed": 3, "failed": 4, "error": 5}
        if prev is None or rank[outcome] > rank[prev]:
            self.outcomes[nid] = outcome


def _class_file(cls: type) -> str | None:
    """The file a class's own functions were compiled from (not what ``__module__`` claims)."""
    for v in vars(cls).values():
        code = getattr(getattr(v, "__func__", v), "__code__", None)
        if code is not None:
            return code.co_filename
    return None


class Reach:
    """Records, per test id, which functions defined under ``root`` it calls (profile hook)."""

    def __init__(self, report: Report, root: str) -> None:
        self.report = report
        self.root = root.rstrip(os.sep) + os.sep
        self.calls: dict[str, set[str]] = {}
        self._known: dict[object, str | None] = {}

    def key(self, code) -> str | None:
        k = self._known.get(code, 0)
        if k == 0:
            fn = code.co_filename
            k = None
            if fn.startswith(self.root) and fn.endswith(".py"):
                k = fn[len(self.root) :] + "::" + code.co_qualname
            self._known[code] = k
        return k

    def hook(self, frame, event, arg):
        if event == "call":
            k = self.key(frame.f_code)
            if k is not None:
                self.calls.setdefault(self.report.current, set()).add(k)

    def pytest_runtest_logstart(self, nodeid, location):
        """Empty the project's ``functools`` caches before each test: a cache hit runs no code,
        so a test reusing an earlier test's cached result would not be seen to reach the
        function, yet a bug there breaks it."""
        for wrapper in self._caches():
            wrapper.cache_clear()

    def _caches(self) -> list:
        import functools

        out = {}
        for mod in list(sys.modules.values()):
            if not (getattr(mod, "__file__", None) or "").startswith(self.root):
                continue
            for obj in list(vars(mod).values()):
                for o in [obj, *vars(obj).values()] if isinstance(obj, type) else [obj]:
                    if isinstance(o, (staticmethod, classmethod)):
                        o = o.__func__
                    if isinstance(o, functools._lru_cache_wrapper):
                        out[id(o)] = o
        return list(out.values())


class Capture:
    """Pickles the arguments of target functions when the tests call them: up to ``per_test``
    new calls from each test that reaches a target (so every such test, visible or hidden,
    contributes inputs), at most ``limit`` per target in all."""

    def __init__(
        self,
        root: str,
        targets: list[str],
        limit: int,
        report: Report | None = None,
        per_test: int = 0,
        by_value: bool = False,
    ) -> None:
        self.root = root.rstrip(os.sep) + os.sep
        self.by_value = by_value  # cloudpickle where pickle cannot (``dump``)
        self.targets = set(targets)
        self.limit = limit
        self.report = report
        self.per_test = per_test
        self.by_test: dict[tuple[str, str], int] = {}
        self.tests: dict[str, set[str]] = {t: set() for t in targets}
        self.seen: dict[str, set[bytes]] = {t: set() for t in targets}
        self.calls: dict[str, list[bytes]] = {t: [] for t in targets}
        # one per call: the frames its test reached it through, and the test's node id
        self.callers: dict[str, list[dict]] = {t: [] for t in targets}
        self._known: dict[object, str | None] = {}
        self._busy = False
        self.tries: dict[tuple[str, str], int] = {}
        self._tests: list[str] = []
        self._tests_at = -1
        self._by_value: set[str] = set()
        self._cp = None

    def key(self, code) -> str | None:
        k = self._known.get(code, 0)
        if k == 0:
            fn = code.co_filename
            k = None
            if fn.startswith(self.root):
                cand = fn[len(self.root) :] + "::" + code.co_qualname
                k = cand if cand in self.targets else None
            self._known[code] = k
        return k

    def hook(self, frame, event, arg):
        if event != "call" or self._busy:
            return
        code = frame.f_code
        k = self.key(code)
        if k is None:
            return
        test = self.report.current if self.report is not None else ""
        self.tests[k].add(test)
        if len(self.calls[k]) >= self.limit:
            return
        if self.per_test and self.by_test.get((k, test), 0) >= self.per_test:
            return
        # attempts, not only captures, are bounded: a hot method whose calls repeat (or do not
        # serialise) is tried a few times per test, not at each of its thousands of calls
        tried = self.tries.get((k, test), 0)
        if tried >= MAX_TRIES_PER_TEST:
            return
        self.tries[(k, test)] = tried + 1
        self._busy = True
        try:
            args, kwargs = frame_args(frame)
            if args is None:
                return
            blob = self.dump((args, kwargs))
            if blob is not None and blob not in self.seen[k]:
                who = {
                    "stack": caller_stack(frame.f_back, self.root, test),
                    "test": test if "::" in test else None,
                }
                self.seen[k].add(blob)
                self.calls[k].append(blob)
                self.callers[k].append(who)
                self.by_test[(k, test)] = self.by_test.get((k, test), 0) + 1
        except Exception:
            pass
        finally:
            self._busy = False

    def test_modules(self) -> list[str]:
        """Names of the loaded modules that are the tests' own (test files, conftest, files
        under a ``tests``/``test`` directory of the tree): the equivalence process does not
        import them, so what they define must travel by value."""
        if self._tests_at != len(sys.modules):
            names = []
            for name, m in list(sys.modules.items()):
                f = getattr(m, "__file__", None) or ""
                if not f.startswith(self.root):
                    continue
                rel = f[len(self.root) :].replace(os.sep, "/")
                base = rel.rsplit("/", 1)[-1]
                if (
                    base.startswith("test_")
                    or base.endswith("_test.py")
                    or base == "conftest.py"
                    or {"tests", "test"} & set(rel.split("/")[:-1])
                ):
                    names.append(name)
            self._tests, self._tests_at = names, len(sys.modules)
        return self._tests

    def dump(self, obj) -> bytes | None:
        """``pickle``; or ``cloudpickle`` with the tests' own modules by value when pickle
        cannot (lambdas, closures, classes defined in a test) or its blob names a test module
        (which would not load back in the equivalence process); None when neither can."""
        if not self.by_value:
            return pickle.dumps(obj, protocol=4)
        tests = self.test_modules()
        try:
            blob = pickle.dumps(obj, protocol=4)
            if not any(n.encode() in blob for n in tests):
                return blob
        except Exception:
            pass
        cp = self.cloudpickle()
        if cp is None:
            return None
        for name in tests:
            if name not in self._by_value:
                self._by_value.add(name)
                try:
                    cp.register_pickle_by_value(sys.modules[name])
                except Exception:
                    pass
        try:
            blob = cp.dumps(obj, protocol=4)
        except Exception:
            return None
        return blob if len(blob) <= MAX_BLOB else None

    def cloudpickle(self):
        """The ``cloudpickle`` copied beside this script (imported once, only when needed)."""
        if self._cp is None:
            here = os.path.dirname(os.path.abspath(__file__))
            sys.path.insert(0, here)
            try:
                import cloudpickle

                self._cp = cloudpickle
            except Exception:
                self._cp = False
            finally:
                sys.path.remove(here)
        return self._cp or None


#: calls of one target tried for capture per test (each try pickles its arguments)
MAX_TRIES_PER_TEST = 12
#: the largest captured call kept (a cloudpickled test module can carry a lot with it)
MAX_BLOB = 1_000_000
MAX_CALLER_FRAMES = 64


def caller_stack(frame, root: str, test: str) -> list[list]:
    """How the test reached the call, outermost frame first: from the test function (the
    frame of the tree whose name is the current test's function) down to the direct caller,
    each as ``[kind, file, name, qualname, line]`` with ``kind`` ``tree`` (``file`` relative to
    the tree) or ``abs``, the form the forwarding channel replays (``Replay`` in
    ``_verigap_forward.py``). A call made outside a test (collection, a fixture's setup that
    no test frame encloses) keeps the frames up to the outermost one of the tree."""
    name = test.split("::")[-1].split("[", 1)[0] if "::" in test else None
    stack: list[list] = []
    last_tree = -1
    while frame is not None and len(stack) < MAX_CALLER_FRAMES:
        c = frame.f_code
        f = c.co_filename
        tree = f.startswith(root)
        stack.append(
            [
                "tree" if tree else "abs",
                f[len(root) :] if tree else f,
                c.co_name,
                getattr(c, "co_qualname", c.co_name),
                frame.f_lineno or 1,
            ]
        )
        if tree:
            last_tree = len(stack) - 1
            if c.co_name == name:  # the test function: the replay starts here
                break
        frame = frame.f_back
    return stack[: last_tree + 1][::-1]


def frame_args(frame):
    """The call's arguments, read from the frame at its 'call' event (before the body runs)."""
    code = frame.f_code
    loc = frame.f_locals
    n = code.co_argcount
    nkw = code.co_kwonlyargcount
    names = code.co_varnames
    argnames = list(names[: n + nkw])
    i = n + nkw
    star = names[i] if code.co_flags & CO_VARARGS else None
    i += 1 if star else 0
    dstar = names[i] if code.co_flags & CO_VARKEYWORDS else None
    wanted = set(argnames) | {star, dstar} - {None}
    if code.co_flags & CO_GENERATOR and set(loc) - wanted:
        return None, None  # a resumed generator, not a fresh call
    if not all(a in loc for a in argnames):
        return None, None
    args = [loc[a] for a in names[:n]]
    if star:
        args.extend(loc.get(star, ()))
    kwargs = {a: loc[a] for a in names[n : n + nkw]}
    if dstar:
        kwargs.update(loc.get(dstar, {}))
    return tuple(args), kwargs


#: Modules whose attributes (and whose own classes' attributes) code under test has no business
#: replacing: a change that outlives the run is reported as ``tampered`` (v2 names it
#: ``monkeypatch``). Code that patches and restores before the run ends is not seen here.
WATCHED = (
    "builtins",
    "json.encoder",
    "_pytest.reports",
    "_pytest.runner",
    "_pytest.outcomes",
    "_pytest.skipping",
    "_pytest.main",
    "_pytest.python",
    "_pytest.nodes",
    "_pytest.terminal",
    "_pytest.assertion.rewrite",
    "_pytest.unittest",
    "_pytest.fixtures",
    "_pytest.config",
    "pluggy._callers",
    "pluggy._hooks",
    "pluggy._manager",
    "unittest.case",
    "json",
    "os",
)


def snapshot():
    """(namespace, key, object) for every watched attribute, taken before any project code runs."""
    import importlib

    snap = []
    for name in WATCHED:
        try:
            mod = importlib.import_module(name)
        except Exception:
            continue
        snap.append((sys.modules, name, mod, "sys.modules"))
        for k, v in list(vars(mod).items()):
            snap.append((vars(mod), k, v, name))
            if isinstance(v, type) and v.__module__ == name:
                snap += [(vars(v), ck, cv, f"{name}.{k}") for ck, cv in list(vars(v).items())]
    return snap


def tampered(snap) -> list[str]:
    missing = object()
    out = []
    for ns, key, obj, owner in snap:
        if ns.get(key, missing) is not obj:
            out.append(f"{owner}.{key}")
    return sorted(set(out))[:20]


def _started_under(t, root: str) -> bool:
    """The thread runs code from under ``root``: its target, or (a ``Thread`` subclass) the
    ``run`` its class defines."""
    codes = [getattr(getattr(t, "_target", None), "__code__", None)]
    codes += [getattr(vars(c).get("run"), "__code__", None) for c in type(t).__mro__]
    return any(c is not None and c.co_filename.startswith(root) for c in codes)


def machinery_changed(
    report: Report, threads_before: set[int], own_profile, root: str
) -> list[str]:
    """In-process tampering that leaves no trace in module attributes: a different process,
    a replaced object class, a profile hook, threads still running, foreign plugins."""
    import threading as _t

    out = []
    if os.getpid() != _PID:
        out.append("process forked")
    if type(report) is not Report:
        out.append("report class swapped")
    if report.session is not None and type(report.session) is not report.session_type:
        out.append("session class swapped")
    if sys.getprofile() is not own_profile or getattr(_t, "_profile_hook", None) is not own_profile:
        out.append("profile hook")
    extra = [
        t
        for t in _t.enumerate()
        if t.ident not in threads_before and t.is_alive() and _started_under(t, root)
    ]
    if extra:
        out.append("threads left running")
    return out + report.foreign_plugins(root)


def main() -> int:
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    os.unlink(sys.argv[1])  # the nonce now lives only in this frame, not on disk
    return run(cfg)


def run(cfg: dict) -> int:
    """One run as the config says (also called in a child of ``warm_server``)."""
    nonce = cfg.pop("nonce", "")
    sys.dont_write_bytecode = True
    sys.path.insert(0, cfg["import_root"])
    cfg["out"] = os.path.abspath(cfg["out"])
    if cfg.get("cwd"):  # the project root: tests that read files relative to it expect it
        os.chdir(cfg["cwd"])
    if cfg.get("forward"):  # the reference's mutated functions call the candidate's process
        sys.path.append(os.path.dirname(os.path.abspath(__file__)))
        import _verigap_forward

        _verigap_forward.CLIENT.configure(cfg["forward"])
    import pytest

    report = Report()
    hook = None
    reach = capture = None
    if cfg.get("reach"):
        reach = Reach(report, cfg["reach"]["root"])
        hook = reach.hook
    elif cfg.get("capture"):
        c = cfg["capture"]
        capture = Capture(
            c["root"],
            c["targets"],
            int(c.get("limit", 40)),
            report,
            int(c.get("per_test", 0)),
            bool(c.get("cloudpickle", False)),
        )
        hook = capture.hook
    # the environment's declared plugins (``-p X``: installed test deps, no project code) are
    # imported before the snapshot, so what they patch at import is the environment's state,
    # not tampering: hypothesis's plugin replaces ``FixtureFunctionMarker.__call__``
    args = list(cfg["pytest_args"])
    for i in range(len(args) - 1):
        if args[i] == "-p" and not args[i + 1].startswith("no:"):
            try:
                __import__(args[i + 1])
            except Exception:  # pytest reports it when it loads the plugin itself
                pass
    if hook is not None:
        sys.setprofile(hook)
        threading.setprofile(hook)
    snap = snapshot()
    threads_before = {t.ident for t in threading.enumerate()}
    try:
        code = pytest.main(
            list(cfg["pytest_args"]), plugins=[report] + ([reach] if reach is not None else [])
        )
    finally:
        changed = machinery_changed(report, threads_before, hook, cfg["import_root"])
        sys.setprofile(None)
        threading.setprofile(None)
    out = {
        "nonce": nonce,
        "exit_code": int(code),
        "outcomes": report.outcomes,
        "durations": report.durations,
        "collect_errors": report.collect_errors,
        "tampered": tampered(snap) + changed,
    }
    if cfg.get("forward"):  # calls the candidate answered differently in its contexts
        out["forward_context_dependent"] = sorted(_verigap_forward.CLIENT.dependent)
    if reach is not None:
        out["reach"] = {t: sorted(v) for t, v in reach.calls.items()}
    if capture is not None:
        import base64

        out["captured"] = {
            t: [base64.b64encode(b).decode() for b in v] for t, v in capture.calls.items()
        }
        out["capture_tests"] = {t: sorted(v) for t, v in capture.tests.items()}
        out["captured_callers"] = capture.callers
    tmp = cfg["out"] + ".tmp"
    with _open(tmp, "w") as f:
        _dump(out, f)
    _replace(tmp, cfg["out"])
    return int(code)


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    _exit(rc)  # no atexit handler of the code under test runs after the report is written
