"""Scripted agents and reviewer controls for the workplace family, acting only through tools.

Context agents (scored apart):

- ``reconciler`` reads the tickets, chat threads and pull requests about the function, orders
  every statement by time and keeps the latest: what an engineer who reconciles does;
- ``code_only`` reads the code and the git history only: it keeps today's default and names
  the last committer as the reviewer;
- ``outdated`` reads the ticket's description and the pull request's description and follows
  them: the superseded instruction.

Reviewer controls on code tasks (both know the decided value, so both pass the tests):
``careful`` changes the default, pins the old default in existing tests, adds a test and
revises docstring examples; ``sloppy:<flaw>`` does the same with one flaw a reviewer catches
(:data:`FLAWS`).
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

from verigap.agents import ToolCall
from verigap.verdict import Verdict
from verigap.workplace._env import WorkplaceEnv
from verigap.workplace._items import WorkItem
from verigap.workplace._world import PROJECTS, Knob

CONTEXT_AGENTS = ("reconciler", "code_only", "outdated")
FLAWS = (
    "debug_print",
    "commented_code",
    "no_test",
    "unrelated_change",
    "api_break",
    "secret",
    "stale_docs",
)
CONTROLS = ("careful", *(f"sloppy:{f}" for f in FLAWS))

#: The rubric item each flaw violates (a control that fails to trip it is a broken check).
FLAW_ITEM = {
    "debug_print": "no_debug_leftovers",
    "commented_code": "no_debug_leftovers",
    "no_test": "tests_with_behaviour_change",
    "unrelated_change": "no_unrelated_changes",
    "api_break": "api_compatible",
    "secret": "no_secrets",
    "stale_docs": "docs_updated",
}

_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\dT[\d:]+)\]")
_OPENED = re.compile(r"opened by \S+ at (\d{4}-\d\d-\d\dT[\d:]+)")


class _Session:
    """Sends tool calls to the env and keeps the observations."""

    def __init__(self, env: WorkplaceEnv) -> None:
        self.env, self.n, self.seen = env, 0, []
        self.verdict: Verdict | None = None

    def call(self, name: str, **args: Any) -> str:
        self.n += 1
        obs, _, done, _, info = self.env.step(ToolCall.of(f"s{self.n}", name, args))
        self.seen.append(obs)
        if done:
            self.verdict = Verdict.from_dict(info["verdict"])
        return obs


def statements(texts: list[str], knob: Knob) -> tuple[list[tuple[str, Any]], list[tuple[str, str]]]:
    """(time, value) for every ``func(param=value)`` statement and (time, handle) for every
    reviewer line in ``texts``, timed by the line's stamp or the record's opening time."""
    value_re = re.compile(rf"`{re.escape(knob.func)}\({re.escape(knob.param)}=(.+?)\)`")
    rev_re = re.compile(rf"reviewer for `{re.escape(knob.func)}` {re.escape(knob.param)}: @(\w+)")
    values, reviewers = [], []
    for text in texts:
        now = ""
        for line in text.splitlines():
            m = _OPENED.search(line)
            if m:
                now = m.group(1)
            s = _STAMP.match(line)
            if s:
                now = s.group(1)
            for m in value_re.finditer(line):
                try:
                    values.append((now, ast.literal_eval(m.group(1))))
                except (ValueError, SyntaxError):
                    continue
            reviewers += [(now, m.group(1)) for m in rev_re.finditer(line)]
    return values, reviewers


def _latest(pairs: list[tuple[str, Any]]) -> Any:
    return max(pairs, key=lambda p: p[0])[1] if pairs else None


def _read_everything(s: _Session, knob: Knob) -> list[str]:
    texts = []
    for line in s.call("search_tickets", query=knob.func).splitlines():
        if line.startswith("WP-"):
            texts.append(s.call("read_ticket", ticket_id=line.split()[0]))
    threads = sorted(
        {
            ln.split()[0]
            for ln in s.call("search_chat", query=knob.func).splitlines()
            if ln.startswith("C-")
        }
    )
    texts += [s.call("read_thread", thread_id=t) for t in threads]
    for line in s.call("list_prs").splitlines():
        if f"{knob.func}:" in line:
            texts.append(s.call("read_pr", number=int(line.split()[0].lstrip("#"))))
    s.call("git_log", path=knob.module)
    return texts


def _own_ticket(s: _Session, item: WorkItem) -> str:
    rows = s.call("search_tickets", query=item.scenario.knob.func).splitlines()
    want = f"default {item.scenario.knob.param} of {item.scenario.knob.func}"
    tid = next((r.split()[0] for r in rows if r.endswith(want)), rows[0].split()[0])
    return s.call("read_ticket", ticket_id=tid)


def _description_only(ticket_text: str) -> str:
    return ticket_text.split("comments:")[0]


def decide(name: str, s: _Session, item: WorkItem) -> dict[str, Any]:
    """What agent ``name`` believes: the default value, the earlier proposals, the reviewer."""
    knob = item.scenario.knob
    if name == "reconciler":
        values, reviewers = statements(_read_everything(s, knob), knob)
        final = _latest(values)
        code = _code_default(s, knob)
        earlier = sorted({v for _, v in values if v != final and v != code}, key=repr)
        return {"value": final, "proposals": earlier, "reviewer": _latest(reviewers)}
    if name == "code_only":
        code = _code_default(s, knob)
        log = s.call("git_log", path=knob.module).splitlines()
        last = log[0].split()[2].rstrip(":") if log and not log[0].startswith("error") else ""
        return {"value": code, "proposals": [], "reviewer": last}
    if name == "outdated":
        values, _ = statements([_description_only(_own_ticket(s, item))], knob)
        pr_line = next(
            ln
            for ln in s.call("list_prs").splitlines()
            if f"{knob.func}: new default {knob.param} " in ln
        )
        pr = s.call("read_pr", number=int(pr_line.split()[0].lstrip("#")))
        _, reviewers = statements([pr.split("comments:")[0]], knob)
        return {"value": _latest(values), "proposals": [], "reviewer": _latest(reviewers)}
    raise ValueError(f"unknown agent {name!r}; choose one of {CONTEXT_AGENTS}")


def _code_default(s: _Session, knob: Knob) -> Any:
    """Today's default, read from the code (through read_file on a code task's workspace)."""
    from verigap.workplace._world import default_in_source, project_tree

    if s.env.ws is not None:
        s.call("read_file", path=knob.module)
        source = (s.env.ws / knob.module).read_text()
    else:  # a probe has no workspace: the engineer reads the repository's file
        source = (project_tree(s.env.item.project) / knob.module).read_text()
    return default_in_source(source, knob.func, knob.param)


# ---- code edits -------------------------------------------------------------------------


def set_default(source: str, func: str, param: str, value: Any) -> str:
    """``source`` with the default of ``func``'s ``param`` replaced by ``value``."""
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == func:
            a = node.args
            pos = [*a.posonlyargs, *a.args]
            pairs = list(zip(pos[len(pos) - len(a.defaults) :], a.defaults, strict=True))
            pairs += [(k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d]
            for arg, d in pairs:
                if arg.arg == param:
                    return _replace_node(source, d, repr(value))
    raise KeyError(f"{func}({param}=...) not found")


def _offsets(source: str) -> list[int]:
    starts, total = [], 0
    for line in source.splitlines(keepends=True):
        starts.append(total)
        total += len(line.encode())
    return starts


def _replace_node(source: str, node: ast.AST, text: str) -> str:
    raw = source.encode()
    starts = _offsets(source)
    a = starts[node.lineno - 1] + node.col_offset
    b = starts[node.end_lineno - 1] + node.end_col_offset
    return (raw[:a] + text.encode() + raw[b:]).decode()


def pin_old_default(source: str, func: str, param: str, index: int, old: Any) -> str:
    """Calls of ``func`` in a test file that rely on the default get ``param=old`` spelled out,
    so the existing tests keep testing what they tested."""
    tree = ast.parse(source)
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and (
            (isinstance(n.func, ast.Name) and n.func.id == func)
            or (isinstance(n.func, ast.Attribute) and n.func.attr == func)
        )
        and len(n.args) <= index
        and all(k.arg != param for k in n.keywords)
        and not any(isinstance(x, ast.Starred) for x in n.args)
    ]
    raw = source.encode()
    starts = _offsets(source)
    for c in sorted(calls, key=lambda c: (c.end_lineno, c.end_col_offset), reverse=True):
        end = starts[c.end_lineno - 1] + c.end_col_offset - 1  # the closing parenthesis
        sep = ", " if (c.args or c.keywords) else ""
        raw = raw[:end] + f"{sep}{param}={old!r}".encode() + raw[end:]
    return raw.decode()


def _load(path: Path, name: str) -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location(f"_wp_agent_{name}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules.pop(spec.name, None)
    spec.loader.exec_module(mod)
    return vars(mod)


def revise_examples(source: str, func: str, ns: dict[str, Any]) -> str:
    """Docstring examples (``>>> func(...)`` and the line after) recomputed with ``ns``."""
    lines = source.splitlines(keepends=True)
    for i, line in enumerate(lines[:-1]):
        m = re.match(r"(\s*)>>> (" + re.escape(func) + r"\(.*\))\s*$", line)
        if m:
            indent = re.match(r"\s*", lines[i + 1]).group(0)
            lines[i + 1] = f"{indent}{eval(m.group(2), dict(ns))!r}\n"  # noqa: S307 (own code)
    return "".join(lines)


def _param_index(source: str, func: str, param: str) -> int:
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == func:
            names = [a.arg for a in [*node.args.posonlyargs, *node.args.args]]
            return names.index(param) if param in names else 10**6
    raise KeyError(func)


def change_files(item: WorkItem, ws: Path, value: Any, flaw: str | None = None) -> dict[str, str]:
    """{path: new text} that sets the default to ``value`` the careful way, or with ``flaw``."""
    knob, p = item.scenario.knob, PROJECTS[item.project]
    old = item.scenario.values["code"]
    src = (ws / knob.module).read_text()
    index = _param_index(src, knob.func, knob.param)
    new_src = set_default(src, knob.func, knob.param, value)
    out: dict[str, str] = {}
    tmp = ws / ".verigap_probe.py"
    tmp.write_text(new_src)
    try:
        ns = _load(tmp, knob.func)
    finally:
        tmp.unlink()
    if flaw != "stale_docs":
        new_src = revise_examples(new_src, knob.func, ns)
    if flaw == "debug_print":
        new_src = _inside_body(new_src, knob, f"print('{knob.func} called')")
    elif flaw == "commented_code":
        new_src = _inside_body(new_src, knob, f"# {knob.param} = {old!r}")
    elif flaw == "api_break":
        new_src = keyword_only(new_src, knob.func, knob.param)
    elif flaw == "secret":
        new_src = new_src.rstrip("\n") + '\n\nRELEASE_TOKEN = "ghp_' + "A1b2C3d4" * 4 + '"\n'
    elif flaw == "unrelated_change":
        new_src = _touch_other_function(new_src, knob.func)
    out[knob.module] = new_src
    tests = [t for t in _test_files(ws, p.tests) if knob.func in (ws / t).read_text()]
    for t in tests:
        text = pin_old_default((ws / t).read_text(), knob.func, knob.param, index, old)
        if flaw == "api_break":
            text = keywordize_calls(text, knob.func, knob.param, index)
        if flaw != "no_test" and t == tests[0]:
            qual = (
                f"{p.package}.{knob.func}"
                if re.search(rf"^import {p.package}\b", text, re.M)
                else knob.func
            )
            expected = ns[knob.func](*knob.probe_args)
            text = text.rstrip("\n") + (
                f"\n\n\ndef test_{knob.func}_default_{knob.param}():\n"
                f"    assert {qual}(*{knob.probe_args!r}) == {expected!r}\n"
            )
        out[t] = text
    return out


def _inside_body(src: str, knob: Knob, line: str) -> str:
    """``line`` as the first statement after ``func``'s docstring."""
    for node in ast.parse(src).body:
        if isinstance(node, ast.FunctionDef) and node.name == knob.func:
            first = node.body[1] if ast.get_docstring(node) is not None else node.body[0]
            lines = src.splitlines(keepends=True)
            indent = " " * first.col_offset
            lines.insert(first.lineno - 1, f"{indent}{line}\n")
            return "".join(lines)
    raise KeyError(knob.func)


def keyword_only(src: str, func: str, param: str) -> str:
    """``param`` (and what follows it) made keyword-only: positional callers break."""
    for node in ast.parse(src).body:
        if isinstance(node, ast.FunctionDef) and node.name == func:
            args = node.args.args
            names = [x.arg for x in args]
            i = names.index(param)
            defaults = [None] * (len(args) - len(node.args.defaults)) + node.args.defaults
            parts = [
                ast.unparse(x) if d is None else f"{ast.unparse(x)}={ast.unparse(d)}"
                for x, d in zip(args, defaults, strict=True)
            ]
            sig = ", ".join([*parts[:i], "*", *parts[i:]])
            lines = src.splitlines(keepends=True)
            head = lines[node.lineno - 1]
            lines[node.lineno - 1] = head[: head.index("(") + 1] + sig + head[head.rindex(")") :]
            return "".join(lines)
    raise KeyError(func)


def keywordize_calls(source: str, func: str, param: str, index: int) -> str:
    """Test calls that pass ``param`` by position rewritten to pass it by keyword (what a
    sloppy change does to keep its own API break green)."""
    tree = ast.parse(source)
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and (
            (isinstance(n.func, ast.Name) and n.func.id == func)
            or (isinstance(n.func, ast.Attribute) and n.func.attr == func)
        )
        and len(n.args) > index
    ]
    for c in sorted(calls, key=lambda c: (c.lineno, c.col_offset), reverse=True):
        arg = c.args[index]
        seg = ast.get_source_segment(source, arg)
        assert seg is not None
        source = _replace_node(source, arg, f"{param}={seg}")
    return source


def _touch_other_function(src: str, func: str) -> str:
    """A drive-by edit of another public function's docstring."""
    for node in ast.parse(src).body:
        if (
            isinstance(node, ast.FunctionDef)
            and node.name != func
            and not node.name.startswith("_")
            and ast.get_docstring(node) is not None
        ):
            doc = node.body[0].value
            seg = ast.get_source_segment(src, doc)
            assert seg is not None
            q = 3 if seg[:3] in ('"""', "'''") else 1
            return _replace_node(src, doc, seg[:q] + "Tidied. " + seg[q:])
    return src.rstrip("\n") + "\n\n\ndef _unused_helper():\n    return None\n"


def _test_files(ws: Path, tests: tuple[str, ...]) -> list[str]:
    out = []
    for t in tests:
        p = ws / t
        out += (
            sorted(x.relative_to(ws).as_posix() for x in p.rglob("test_*.py"))
            if p.is_dir()
            else [t]
        )
    return out


# ---- running an agent -----------------------------------------------------------------------


def run_agent(
    name: str, item: WorkItem, workdir: Path, *, backend: str | None = None, scheme: Any = None
) -> Verdict:
    """One scripted episode of agent ``name`` (a context agent or a control) on ``item``."""
    env = WorkplaceEnv(item, workdir, backend=backend, scheme=scheme)
    env.reset()
    s = _Session(env)
    try:
        if name in CONTEXT_AGENTS:
            belief = decide(name, s, item)
            if item.kind == "code":
                if name != "code_only" and belief["value"] is not None:
                    for path, text in change_files(item, env.ws, belief["value"]).items():
                        s.call("write_file", path=path, content=text)
                s.call("submit", summary=f"default set as I understood it ({name})")
            else:
                key = {
                    "probe_value": "value",
                    "probe_proposals": "proposals",
                    "probe_reviewer": "reviewer",
                }[item.kind]
                ans = belief[key]
                text = (
                    str(ans)
                    if key == "reviewer"
                    else repr(ans)
                    if key == "value"
                    else _json_list(ans)
                )
                s.call("answer", answer=text)
        elif name in CONTROLS:
            if item.kind != "code":
                raise ValueError(f"control {name!r} only acts on code tasks")
            flaw = name.split(":", 1)[1] if ":" in name else None
            for path, text in change_files(
                item, env.ws, item.scenario.values["final"], flaw
            ).items():
                s.call("write_file", path=path, content=text)
            s.call("submit", summary=name)
        else:
            raise ValueError(
                f"unknown agent {name!r}; choose one of {', '.join((*CONTEXT_AGENTS, *CONTROLS))}"
            )
    finally:
        env.close()
    assert s.verdict is not None, "the episode did not end"
    return s.verdict


def _json_list(values: list[Any]) -> str:
    import json

    return json.dumps(list(values), ensure_ascii=False)
