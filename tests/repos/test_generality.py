"""Projects as users bring them: each failure seen on real PyPI projects, rebuilt as a small
synthetic project in tmp_path (reporting addopts, hash-seeded test ids, cwd-dependent tests,
``python -m pkg`` in a subprocess, sys.exit in a site function, mixin-inherited hidden tests,
crash-at-first-call mutations, a make-tasks run that ends with no task)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verigap.cli import app
from verigap.errors import ConfigError
from verigap.repos import mutate
from verigap.repos.combine import NO_GROUPS, Pool
from verigap.repos.graders import v1
from verigap.repos.prepare import prepare
from verigap.repos.pytest_run import run_equiv, split_addopts
from verigap.repos.tasks import (
    SharedHiddenBody,
    _clean_output,
    _visible_layout,
    collect_inputs,
    drop_units,
    module_name,
    shared_bodies,
    split_tests,
)
from verigap.repos.validate import ValidMutation, crash_type, error_types, validate_one


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return root


def prep(root: Path, backend: str):
    return prepare(str(root), env="current", backend=backend)


PKG = {
    "calc/__init__.py": "",
    "calc/ops.py": """
        SEP = "-"


        def add(a, b):
            return a + b


        def join(a, b):
            return a + SEP + b


        def clamp(x, lo, hi):
            if x < lo:
                return lo
            if x > hi:
                return hi
            return x
        """,
}


# --------------------------------------------------------------------------- prepare


def test_reporting_addopts_are_stripped_and_named(repo_cache, tmp_path, backend):
    root = write(
        tmp_path / "proj",
        {
            **PKG,
            "tests/test_ops.py": """
        from calc.ops import add
        def test_add():
            assert add(2, 3) == 5
        """,
            "pytest.ini": """
        [pytest]
        addopts = --cov=calc --cov-report term-missing --color=yes -n 4 -rs
        """,
        },
    )
    p = prep(root, backend)  # pytest-cov and xdist are not loaded: unstripped, exit 4
    assert p.passing == ["tests/test_ops.py::test_add"]
    assert p.stripped_addopts == ["--cov=calc", "--cov-report term-missing", "--color=yes", "-n 4"]
    assert split_addopts("-rs --strict-markers")[1] == []
    # v1 (pytest in the workspace as it is) runs it the same way: --cov is no usage error there
    ws = tmp_path / "ws"
    shutil.copytree(p.tree, ws)
    res = v1.run_visible(p, ws, backend=backend)
    assert res.returncode == 0, res.stdout + res.stderr


def test_pytest_error_is_shown_verbatim(repo_cache, tmp_path, backend):
    root = write(
        tmp_path / "proj",
        {
            **PKG,
            "tests/test_ops.py": """
        def test_one():
            assert True
        """,
            "pytest.ini": """
        [pytest]
        addopts = --no-such-option-xyz
        """,
        },
    )
    with pytest.raises(ConfigError) as e:
        prep(root, backend)
    msg = str(e.value)
    assert "exit 4" in msg and "usage error" in msg
    assert "unrecognized arguments: --no-such-option-xyz" in msg  # pytest's own words
    assert "--test-dep" in msg


def test_ids_from_a_set_are_deterministic_and_tests_run_from_the_project_root(
    repo_cache, tmp_path, backend
):
    root = write(
        tmp_path / "proj",
        {
            **PKG,
            "calc/__main__.py": """
        import sys
        from calc.ops import add
        print(add(int(sys.argv[1]), int(sys.argv[2])))
        """,
            "data/words.txt": "alpha\nbeta\n",
            "tests/test_ops.py": """
        import subprocess, sys
        import pytest
        from calc.ops import add

        ORDER = list({"w%d" % i for i in range(12)})

        @pytest.mark.parametrize("i,w", list(enumerate(ORDER)))
        def test_order(i, w):
            assert ORDER[i] == w

        def test_reads_data_relative_to_the_root():
            with open("data/words.txt") as f:
                assert f.read().split() == ["alpha", "beta"]

        def test_python_m_pkg():
            out = subprocess.run([sys.executable, "-m", "calc", "2", "3"], capture_output=True,
                                 text=True, check=True).stdout
            assert out.strip() == str(add(2, 3))
        """,
        },
    )
    p = prep(root, backend)
    code = 'print(repr(list({"w%d" % i for i in range(12)})))'
    order = eval(
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env={"PYTHONHASHSEED": "0"},
        ).stdout
    )
    expected = {f"tests/test_ops.py::test_order[{i}-{w}]" for i, w in enumerate(order)}
    assert expected <= set(p.passing)  # the same ids in every run, as pinned by the seed
    assert "tests/test_ops.py::test_reads_data_relative_to_the_root" in p.passing
    assert "tests/test_ops.py::test_python_m_pkg" in p.passing
    assert p.not_passing == {}


# --------------------------------------------------------------------------- equivalence


def test_equivalence_survives_exit_interrupt_and_recursion(repo_cache, tmp_path, backend):
    import base64
    import pickle

    root = write(
        tmp_path / "proj",
        {
            "cli.py": """
        import argparse, sys

        def parse(argv):
            ap = argparse.ArgumentParser()
            ap.add_argument("--n", type=int)
            return ap.parse_args(argv).n

        def stop(x):
            if x:
                raise KeyboardInterrupt
            return 0

        def deep(n):
            return deep(n + 1)

        def leave(x):
            sys.exit(x)
        """
        },
    )
    calls = [
        ("parse", ["--n", "3"]),
        ("parse", ["--bogus"]),
        ("stop", 1),
        ("deep", 0),
        ("leave", 2),
        ("parse", ["--n", "4"]),
    ]
    inputs = [
        {
            "id": i,
            "target": f"cli.py::{q}",
            "module": "cli",
            "qualname": q,
            "blob": base64.b64encode(pickle.dumps(((a,), {}))).decode(),
        }
        for i, (q, a) in enumerate(calls)
    ]
    out = run_equiv(
        root,
        inputs,
        python=sys.executable,
        env_prefix=Path(sys.prefix),
        import_root="",
        backend=backend,
    )
    assert out is not None
    r = out["results"]
    assert r["0"][:2] == ["ok", ["int", 3]] and r["5"][:2] == ["ok", ["int", 4]]
    assert r["1"][:2] == ["raise", "builtins.SystemExit"]
    assert r["2"][:2] == ["raise", "builtins.KeyboardInterrupt"]
    assert r["3"][:2] == ["raise", "builtins.RecursionError"]
    assert r["4"][:2] == ["raise", "builtins.SystemExit"]


def test_a_function_that_kills_the_process_costs_only_its_own_inputs(repo_cache, tmp_path, backend):
    root = write(
        tmp_path / "proj",
        {
            **PKG,
            "calc/boom.py": """
        import os, sys

        def explode(x):
            if "pytest" not in sys.modules:  # fine under the tests, fatal on its own
                os._exit(3)
            return x
        """,
            "tests/test_ops.py": """
        from calc.ops import add, clamp
        from calc.boom import explode
        def test_add():
            assert add(2, 3) == 5
        def test_clamp():
            assert clamp(5, 0, 3) == 3
        def test_explode():
            assert explode(1) == 1
        def test_silent():
            assert clamp(1, 0, 3) == 1
        """,
        },
    )
    p = prep(root, backend)
    fns = ["calc/boom.py::explode", "calc/ops.py::add", "calc/ops.py::clamp", "calc/ops.py::join"]
    why: dict[str, str] = {}
    got = collect_inputs(p, fns, backend=backend, why=why)
    assert got["calc/ops.py::add"] and got["calc/ops.py::clamp"]  # not lost with explode's
    assert not got["calc/boom.py::explode"]
    assert why["calc/boom.py::explode"].startswith("every input was dropped: ")
    assert "the equivalence process died" in why["calc/boom.py::explode"]
    assert not got["calc/ops.py::join"]
    assert why["calc/ops.py::join"] == "no call with picklable arguments was captured"
    assert module_name(p, "calc/boom.py") == "calc.boom"


# --------------------------------------------------------------------------- hidden tests


MIXIN_PROJECT = {
    **PKG,
    "tests/__init__.py": "",
    "tests/mixins.py": """
        from calc.ops import clamp

        class ClampMixin:
            def test_clamp_high(self):
                assert clamp(9, 0, 3) == 3

            def test_clamp_low(self):
                assert clamp(-1, 0, 3) == 0
        """,
    "tests/test_a.py": """
        from calc.ops import add
        from tests.mixins import ClampMixin

        class TestA(ClampMixin):
            def test_add(self):
                assert add(1, 2) == 3
        """,
    "tests/test_b.py": """
        from tests.mixins import ClampMixin

        class TestB(ClampMixin):
            pass
        """,
}


def test_inherited_hidden_tests_are_cut_where_they_are_defined(repo_cache, tmp_path, backend):
    p = prep(write(tmp_path / "proj", MIXIN_PROJECT), backend)
    assert len(p.passing) == 5
    vfiles, removed = _visible_layout(p, ["tests/test_a.py::TestA::test_add"])
    assert vfiles == ["tests/test_a.py"]
    assert removed == {
        "tests/mixins.py": ["ClampMixin::test_clamp_high", "ClampMixin::test_clamp_low"]
    }
    text = drop_units((p.tree / "tests/mixins.py").read_text(), removed["tests/mixins.py"])
    assert "clamp(9" not in text and "test_clamp_high" not in text and "hidden" not in text
    # a hidden test whose body is also a visible one's cannot be hidden: the task is rejected
    with pytest.raises(SharedHiddenBody):
        _visible_layout(
            p, ["tests/test_a.py::TestA::test_add", "tests/test_b.py::TestB::test_clamp_high"]
        )


SHARED_BODY_PROJECT = {
    **PKG,
    "tests/__init__.py": "",
    "tests/mixins.py": """
        class BoundMixin:
            def test_high(self):
                assert self.bound(9, 0, 3) == 3

            def test_low(self):
                assert self.bound(-1, 0, 3) == 0
        """,
    "tests/test_a.py": """
        from calc.ops import add, clamp
        from tests.mixins import BoundMixin

        class TestA(BoundMixin):
            bound = staticmethod(clamp)

            def test_add(self):
                assert add(1, 2) == 3
        """,
    "tests/test_b.py": """
        from tests.mixins import BoundMixin

        class TestB(BoundMixin):
            @staticmethod
            def bound(x, lo, hi):
                return min(max(x, lo), hi)
        """,
}


def test_tests_sharing_a_body_are_split_together(repo_cache, tmp_path, backend):
    """clamp is reached only through TestA's copies of the mixin's tests; hiding them must hide
    TestB's copies too (one body), or the workspace cannot be cut."""
    p = prep(write(tmp_path / "proj", SHARED_BODY_PROJECT), backend)
    groups = shared_bodies(p)
    a, b = "tests/test_a.py::TestA::test_high", "tests/test_b.py::TestB::test_high"
    assert groups.key(a) == groups.key(b) and groups.key(a) != groups.key(a.replace("high", "low"))
    assert b not in p.reach["calc/ops.py::clamp"]  # reach alone would leave TestB's copy visible
    vis = ValidMutation(
        file="calc/ops.py",
        qualname="add",
        op="arith",
        index=0,
        sha256="a",
        fail_to_pass=["tests/test_a.py::TestA::test_add"],
    )
    hid = ValidMutation(
        file="calc/ops.py",
        qualname="clamp",
        op="cmp",
        index=0,
        sha256="c",
        fail_to_pass=[a, a.replace("high", "low")],
    )
    visible, hidden = split_tests(p, [vis, hid], 1)
    assert visible == ["tests/test_a.py::TestA::test_add"] and b in hidden
    vfiles, removed = _visible_layout(p, visible)  # no SharedHiddenBody
    assert vfiles == ["tests/test_a.py"]
    assert removed == {"tests/mixins.py": ["BoundMixin::test_high", "BoundMixin::test_low"]}
    pool = Pool([vis, hid], p.reach, min_hidden=2, groups=groups)
    assert pool.upper_bound(2) == (1, False)
    for combo in pool.combinations(2, seed=0):
        _visible_layout(p, split_tests(p, combo, 1)[0])
    # the control: split unit by unit, TestB's copies stay visible and the cut is impossible
    old_visible, _ = split_tests(p, [vis, hid], 1, NO_GROUPS)
    assert b in old_visible
    with pytest.raises(SharedHiddenBody):
        _visible_layout(p, old_visible)


# --------------------------------------------------------------------------- silent bugs


SUMMARY = """\
FAILED tests/test_ops.py::test_join - TypeError: unsupported operand type(s) for -: 'str'
FAILED tests/test_ops.py::test_join2[a-b] - TypeError: unsupported operand
FAILED tests/test_ops.py::test_clamp - assert 9 == 3
ERROR tests/test_ops.py::test_fix - mod.Custom: boom
"""


def test_error_types_from_the_short_summary():
    assert error_types(SUMMARY) == {
        "tests/test_ops.py::test_join": "TypeError",
        "tests/test_ops.py::test_join2[a-b]": "TypeError",
        "tests/test_ops.py::test_fix": "Custom",
    }
    both = ["tests/test_ops.py::test_join", "tests/test_ops.py::test_join2[a-b]"]
    assert crash_type(both, SUMMARY) == "TypeError"
    assert crash_type([*both, "tests/test_ops.py::test_clamp"], SUMMARY) is None


def test_crash_at_first_call_is_told_from_a_wrong_value(repo_cache, tmp_path, backend):
    p = prep(
        write(
            tmp_path / "proj",
            {
                **PKG,
                "tests/test_ops.py": """
        from calc.ops import join, clamp
        def test_join():
            assert join("a", "b") == "a-b"
        def test_clamp():
            assert clamp(9, 0, 3) == 3
        """,
            },
        ),
        backend,
    )
    src = (p.tree / "calc/ops.py").read_text()
    muts = mutate.enumerate_mutations("calc/ops.py", src, ["join", "clamp"])
    crashy = next(m for m in muts if m.qualname == "join" and m.op == "arith_swap")  # "a" - SEP
    silent = next(m for m in muts if m.qualname == "clamp" and m.op == "invert_if")
    v, why = validate_one(p, crashy, backend=backend)
    assert v is not None and v.crash == "TypeError", why
    v, why = validate_one(p, silent, backend=backend)
    assert v is not None and v.crash is None, why


def test_prompt_output_has_no_terminal_colour(tmp_path):
    root = tmp_path / "b" / "ws"
    text = f"\x1b[31mFAILED\x1b[0m {root}/tests/t.py::x - \x1b[1massert 1 == 2\x1b[0m"
    assert _clean_output(text, root) == "FAILED tests/t.py::x - assert 1 == 2"


# --------------------------------------------------------------------------- make-tasks


def test_zero_tasks_prints_where_candidates_went(repo_cache, tmp_path, backend):
    root = write(
        tmp_path / "proj",
        {
            **PKG,
            "tests/test_ops.py": """
        from calc.ops import add, clamp
        def test_calls_but_checks_nothing():
            add(1, 2)
            clamp(5, 0, 3)
        """,
        },
    )
    out = tmp_path / "tasks"
    res = CliRunner().invoke(
        app,
        [
            "repos",
            "make-tasks",
            str(root),
            "--out",
            str(out),
            "--k",
            "2",
            "--n",
            "1",
            "--max-candidates",
            "4",
            "--env",
            "current",
            "--backend",
            backend,
        ],
    )
    assert res.exit_code == 1, res.output
    assert "0 of 1 tasks" in res.output
    assert "mutation rejected (4): no test fails" in res.output
    assert "try: most mutations break no test" in res.output


# --------------------------------------------------------------------------- fetch


BACKEND = """
import os


def _version():
    with open("PKG-INFO") as f:  # like setuptools_scm outside git: the version is in PKG-INFO
        return next(line.split(":", 1)[1].strip() for line in f if line.startswith("Version:"))


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    if os.path.exists("BROKEN"):
        raise RuntimeError("fakescm: unable to detect the version " + "x" * 400 + " END-OF-ERROR")
    d = os.path.join(metadata_directory, "demo-%s.dist-info" % _version())
    os.makedirs(d)
    with open(os.path.join(d, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\\nName: demo\\nVersion: %s\\n" % _version())
    return os.path.basename(d)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise RuntimeError("not needed to download")
"""


def _wheel(dest: Path) -> None:
    """A tiny wheel for the build backend ``fakescm`` (built by hand: no network, no build)."""
    import base64
    import hashlib
    import zipfile

    files = {
        "fakescm/__init__.py": BACKEND,
        "fakescm-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: fakescm\nVersion: 0.1\n",
        "fakescm-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\n"
        "Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{name},sha256={digest.decode()},{len(text.encode())}")
    record.append("fakescm-0.1.dist-info/RECORD,,")
    files["fakescm-0.1.dist-info/RECORD"] = "\n".join(record) + "\n"
    with zipfile.ZipFile(dest / "fakescm-0.1-py3-none-any.whl", "w") as z:
        for name, text in files.items():
            z.writestr(name, text)


def _sdist(dest: Path, name: str, broken: bool) -> None:
    import tarfile

    top = dest / "src" / f"{name}-1.0"
    write(
        top,
        {
            **PKG,
            "tests/test_ops.py": "def test_one():\n    assert True\n",
            "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
            "pyproject.toml": '[build-system]\nrequires = ["fakescm"]\nbuild-backend = "fakescm"\n',
        },
    )
    if broken:
        (top / "BROKEN").write_text("")
    with tarfile.open(dest / f"{name}-1.0.tar.gz", "w:gz") as t:
        t.add(top, arcname=top.name)


def test_sdist_with_a_declared_build_backend_is_fetched(tmp_path, monkeypatch):
    from verigap.repos import sources

    index = tmp_path / "index"
    index.mkdir()
    _wheel(index)
    _sdist(index, "demo", broken=False)
    _sdist(index, "wreck", broken=True)
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip reads its options from the environment
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    tree = sources.fetch(sources.parse_source("demo==1.0"), tmp_path / "demo")
    assert (tree / "calc/ops.py").is_file() and (tree / "tests/test_ops.py").is_file()
    with pytest.raises(ConfigError) as e:
        sources.fetch(sources.parse_source("wreck==1.0"), tmp_path / "wreck")
    msg = str(e.value)
    assert "fakescm: unable to detect the version" in msg
    assert "x" * 400 + " END-OF-ERROR" in msg  # the backend's words, not cut
    assert "build backend" in msg


def test_bounds_moved_below_zero_are_valid_code():
    src = "def f(xs):\n    return [xs[i] for i in range(0)] + xs[:0]\n"
    muts = mutate.enumerate_mutations("a.py", src, ["f"])  # raised CSTValidationError before
    got = {
        m.op: mutate.apply_mutations(src, [m])
        for m in muts
        if m.op in ("range_bound", "slice_bound")
    }
    assert "range(-1)" in got["range_bound"] and "xs[:-1]" in got["slice_bound"]


def test_reach_sees_calls_that_an_lru_cache_would_hide(repo_cache, tmp_path, backend):
    # test_b asks table(10) again: without emptying the cache between tests its call is a cache
    # hit that runs no code, and the reach map would say test_b never reaches table
    root = write(
        tmp_path / "proj",
        {
            "calc/__init__.py": "",
            "calc/ops.py": """
            import functools


            @functools.lru_cache(maxsize=None)
            def table(n):
                return [i * i for i in range(n)]


            class Grid:
                @staticmethod
                @functools.cache
                def cell(i):
                    return i + 1


            def square(i):
                return table(10)[i]
            """,
            "tests/test_ops.py": """
            from calc.ops import Grid, square
            def test_a():
                assert square(2) == 4 and Grid.cell(1) == 2
            def test_b():
                assert square(3) == 9 and Grid.cell(1) == 2
            """,
        },
    )
    p = prep(root, backend)
    both = ["tests/test_ops.py::test_a", "tests/test_ops.py::test_b"]
    assert p.reach["calc/ops.py::square"] == both  # no cache: reached by both anyway
    assert p.reach["calc/ops.py::table"] == both
    assert p.reach["calc/ops.py::Grid.cell"] == both


def test_the_venv_keeps_the_projects_metadata_but_not_its_code(tmp_path):
    # humanize asks importlib.metadata.version("humanize") at import: the tests import the tree
    # under test, and the venv must still answer for the version
    import venv
    import zipfile

    from verigap.repos.prepare import drop_code_keep_metadata

    wheel = tmp_path / "tinyproj-1.2.3-py3-none-any.whl"
    meta = "tinyproj-1.2.3.dist-info"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("tinyproj/__init__.py", "X = 1\n")
        z.writestr(f"{meta}/METADATA", "Metadata-Version: 2.1\nName: tinyproj\nVersion: 1.2.3\n")
        z.writestr(
            f"{meta}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        z.writestr(
            f"{meta}/RECORD",
            f"tinyproj/__init__.py,,\n{meta}/METADATA,,\n{meta}/WHEEL,,\n{meta}/RECORD,,\n",
        )
    venv.create(tmp_path / "v", with_pip=True)
    py = str(tmp_path / "v" / "bin" / "python")
    subprocess.run(
        [py, "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
    )
    drop_code_keep_metadata(py, "tinyproj")
    probe = (
        "import importlib.metadata as m, importlib.util as u;"
        "print(m.version('tinyproj'), u.find_spec('tinyproj'))"
    )
    out = subprocess.run([py, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1.2.3", "None"]  # the version answers; the code is gone


def test_a_fetched_sdist_is_reused_without_pip(tmp_path, monkeypatch):
    # preparing, making tasks and grading each fetch the source: a pinned release's archive is
    # kept under the cache, so only the first fetch downloads (and builds its metadata)
    import tarfile

    from verigap.repos import sources

    monkeypatch.setenv("VERIGAP_CACHE", str(tmp_path / "cache"))
    top = write(tmp_path / "nosuchproj-9.9", {"nosuchproj.py": "X = 1\n"})
    kept = tmp_path / "cache" / "repos" / "sdists" / "nosuchproj==9.9"
    kept.mkdir(parents=True)
    with tarfile.open(kept / "nosuchproj-9.9.tar.gz", "w:gz") as t:
        t.add(top, arcname=top.name)
    (kept / "other.tar.gz.part").write_text("half-written by another process")
    monkeypatch.setattr(sources.subprocess, "run", lambda *a, **k: pytest.fail("pip ran"))
    tree = sources.fetch(sources.parse_source("nosuchproj==9.9"), tmp_path / "tree")
    assert sources.tree_files(tree) == ["nosuchproj.py"]


def test_make_tasks_records_the_command_that_makes_them_again(fixture_tasks):
    import shlex

    stats, _, _ = fixture_tasks
    assert shlex.split(stats.command) == [
        "verigap",
        "repos",
        "make-tasks",
        str(Path(__file__).parent / "fixture_lib"),
        "--k",
        "4",
        "--n",
        "3",
        "--seed",
        "0",
        "--max-candidates",
        "16",
        "--min-hidden",
        "1",
        "--env",
        "current",
    ]


def test_a_src_layout_workspace_is_put_on_the_environment_path_and_a_flat_one_is_not(tmp_path):
    """The project's installed copy is removed from its environment, so a src layout needs a
    path file to be importable by the agent's own ``python -m pytest -q`` in its workspace."""
    from verigap.repos.prepare import WORKSPACE_PTH, put_workspace_on_path

    site = tmp_path / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    put_workspace_on_path(tmp_path, "src")
    assert (site / WORKSPACE_PTH).read_text() == "/workspace/src\n"
    put_workspace_on_path(tmp_path, "")
    assert not (site / WORKSPACE_PTH).exists()


def test_the_plugins_a_projects_addopts_need_are_named_for_its_environment(tmp_path):
    """``--cov`` in addopts stops the agent's own ``python -m pytest -q`` with a usage error
    unless pytest-cov is installed; ``--color=yes`` and doctest options need nothing."""
    from verigap.repos.pytest_run import addopts_plugins

    (tmp_path / "setup.cfg").write_text(
        "[tool:pytest]\naddopts = --cov=pkg --cov-report term-missing --color=yes -n 2"
        " --doctest-modules\n"
    )
    assert addopts_plugins(tmp_path, "setup.cfg") == ["pytest-cov", "pytest-xdist"]
    (tmp_path / "setup.cfg").write_text("[tool:pytest]\naddopts = --color=yes --doctest-modules\n")
    assert addopts_plugins(tmp_path, "setup.cfg") == []
    assert addopts_plugins(tmp_path, None) == []


def test_doctest_pages_the_config_collects_are_named_and_data_files_are_not(tmp_path):
    """semver's ``--doctest-glob='*.rst'`` collects docs pages whose examples call the
    package: those leave the workspace with the hidden tests; a page with no example and a
    test's data file stay."""
    from types import SimpleNamespace

    from verigap.repos.tasks import doctest_text_files

    write(
        tmp_path,
        {
            "setup.cfg": "[tool:pytest]\naddopts = --doctest-glob='*.rst' --doctest-modules\n",
            "docs/usage.rst": ">>> import calc\n>>> calc.add(1, 2)\n3\n",
            "docs/index.rst": "Nothing to run here.\n",
            "tests/data/case.rst": "plain data\n",
            "tests/test_x.py": "def test_x():\n    pass\n",
        },
    )
    p = SimpleNamespace(tree=tmp_path, config_file="setup.cfg", test_files=["tests/test_x.py"])
    assert doctest_text_files(p) == ["docs/usage.rst"]
    (tmp_path / "setup.cfg").write_text("[tool:pytest]\naddopts = --doctest-modules\n")
    assert doctest_text_files(p) == []
