"""What an agent's shell commands wrote: the file writes a ``run`` call makes without the
``write_file`` / ``edit_file`` tools (``sed -i``, heredocs, ``echo >``, ``cp``/``mv``, ``rm``,
``python -c`` / ``python - <<EOF`` writes, ``git checkout -- f`` / ``git stash`` reverts).

A monitor that follows only the file tools cannot see a test rewritten by ``sed -i``. This
module replays the common shapes exactly where it can (a heredoc's text, a ``sed`` substitution
on a file whose text is known) and otherwise records the path as written with unknown text
(``None``), so the path is still judged by what it is (a test, a conftest, a config file) even
when its new text is not known.
"""

from __future__ import annotations

import ast
import posixpath
import re
import shlex
from dataclasses import dataclass

_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_REDIRECT = re.compile(r"(?<![0-9&<])(>>?)\s*([^\s;&|<>]+)")
_PY = re.compile(r"^(\S*/)?python[0-9.]*$")


@dataclass(frozen=True)
class Write:
    """One effect on a file: ``text`` None means written with text the replay cannot know;
    ``deleted`` a removal; ``revert`` back to the task base (``path`` "" = every file, kept
    on a stash that ``restore`` brings back: ``git stash`` / ``git stash pop``; ``"."`` every
    file, no stash). ``path`` "" without ``revert``/``restore``: files changed that the command
    does not name (``patch``, ``git apply``, a branch switch)."""

    path: str
    text: str | None = None
    deleted: bool = False
    revert: bool = False
    restore: bool = False


def _norm(path: str) -> str:
    p = posixpath.normpath(path.strip("'\""))
    return p[2:] if p.startswith("./") else p


def _sed_regex(pat: str, extended: bool) -> str:
    """A sed pattern as a Python regex (basic syntax: ``\\(`` groups, ``(`` literal)."""
    if extended:
        return pat
    out, i = [], 0
    while i < len(pat):
        ch = pat[i]
        if ch == "\\" and i + 1 < len(pat):
            nxt = pat[i + 1]
            out.append(nxt if nxt in "(){}|+?" else "\\" + nxt)
            i += 2
            continue
        out.append("\\" + ch if ch in "(){}|+?" else ch)
        i += 1
    return "".join(out)


def _sed_apply(script: str, text: str, extended: bool) -> str | None:
    """``text`` after one sed ``s`` command, or None for any other command."""
    script = script.strip()
    if len(script) < 4 or script[0] != "s":
        return None
    d = script[1]
    parts, cur, i = [], "", 2
    while i < len(script):
        ch = script[i]
        if ch == "\\" and i + 1 < len(script) and script[i + 1] == d:
            cur += d
            i += 2
            continue
        if ch == d:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
        i += 1
    parts.append(cur)
    if len(parts) != 3:
        return None
    pat, rep, flags = parts
    rep = re.sub(r"(?<!\\)&", r"\\g<0>", rep)
    try:
        rx = re.compile(_sed_regex(pat, extended), re.I if "I" in flags else 0)
        lines = text.split("\n")
        return "\n".join(rx.sub(rep, ln, count=0 if "g" in flags else 1) for ln in lines)
    except (re.error, IndexError):
        return None


def _py_writes(code: str, files: dict[str, str | None]) -> list[Write]:
    """Writes a Python snippet makes: ``open(P, "w").write(S)``, ``Path(P).write_text(S)``
    (``S`` a folded string, or ``.read_text().replace(A, B)`` of a known file), removals.
    Anything written in another way is a write of unknown text to the path it names."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []

    def lit(n: ast.AST) -> str | None:
        return n.value if isinstance(n, ast.Constant) and isinstance(n.value, str) else None

    named: dict[str, str] = {}

    def path_of(n: ast.AST) -> str | None:
        if isinstance(n, ast.Name):
            return named.get(n.id)
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id in ("open", "Path")
            and n.args
        ):
            return lit(n.args[0])
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("Path", "open")
            and n.args
        ):
            return lit(n.args[0])
        return None

    def value(n: ast.AST) -> str | None:
        s = lit(n)
        if s is not None:
            return s
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "replace"
            and len(n.args) == 2
        ):
            inner = n.func.value
            src = (
                inner.func.value
                if isinstance(inner, ast.Call)
                and isinstance(inner.func, ast.Attribute)
                and inner.func.attr in ("read_text", "read")
                else None
            )
            p = path_of(src) if src is not None else None
            a, b = lit(n.args[0]), lit(n.args[1])
            base = files.get(_norm(p)) if p else None
            if base is not None and a is not None and b is not None:
                return base.replace(a, b)
        return None

    out: list[Write] = []
    handles: dict[str, str] = {}
    for n in ast.walk(tree):  # p = Path("x.py"): the name stands for the path
        if (
            isinstance(n, ast.Assign)
            and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name)
            and isinstance(n.value, ast.Call)
            and not (isinstance(n.value.func, ast.Name) and n.value.func.id == "open")
        ):
            p = path_of(n.value)
            if p:
                named[n.targets[0].id] = p
    for n in ast.walk(tree):
        if isinstance(n, ast.With):
            for item in n.items:
                c = item.context_expr
                if (
                    isinstance(c, ast.Call)
                    and isinstance(c.func, ast.Name)
                    and c.func.id == "open"
                    and len(c.args) >= 2
                    and "r" not in (lit(c.args[1]) or "r")
                    and isinstance(item.optional_vars, ast.Name)
                    and lit(c.args[0])
                ):
                    handles[item.optional_vars.id] = lit(c.args[0])  # type: ignore[assignment]
    for n in ast.walk(tree):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
            continue
        attr, recv = n.func.attr, n.func.value
        p = None
        if attr in ("write", "writelines"):
            if isinstance(recv, ast.Name) and recv.id in handles:
                p = handles[recv.id]
            elif (
                isinstance(recv, ast.Call)
                and isinstance(recv.func, ast.Name)
                and recv.func.id == "open"
                and len(recv.args) >= 2
                and "r" not in (lit(recv.args[1]) or "r")
            ):
                p = lit(recv.args[0])
        elif attr in ("write_text", "write_bytes"):
            p = path_of(recv)
        elif attr in ("unlink", "remove") and (path_of(recv) or (n.args and lit(n.args[0]))):
            target = path_of(recv) or lit(n.args[0])  # type: ignore[arg-type]
            out.append(Write(_norm(target), deleted=True))  # type: ignore[arg-type]
            continue
        if p:
            text = value(n.args[0]) if n.args and attr != "writelines" else None
            out.append(Write(_norm(p), text))
    return out


#: git commands that change tracked files in ways the command line does not spell out.
_GIT_WRITERS = {
    "apply",
    "am",
    "cherry-pick",
    "revert",
    "merge",
    "pull",
    "rebase",
    "switch",
    "clean",
    "mv",
    "rm",
}
_HEAD = ("HEAD", "@")


def _git_checkout(verb: str, args: list[str], files: dict[str, str | None]) -> list[Write]:
    """``git checkout`` / ``git restore``: the base text back (``-- f``, ``f``, ``.``), another
    revision's text (``git checkout REV -- f``, ``--source=REV``: unknown here), or a branch
    switch (every file may change: ``Write("")``). ``checkout -b NAME`` changes nothing."""
    dash = args.index("--") if "--" in args else None
    head, paths = (args[:dash], args[dash + 1 :]) if dash is not None else (args, [])
    source: str | None = None
    pos: list[str] = []
    partial = False
    i = 0
    while i < len(head):
        a = head[i]
        if a in ("-b", "-B", "--orphan") or (a == "--staged" and "--worktree" not in head):
            return []  # a new branch at HEAD, or the index only: the files stay as they are
        if a in ("-s", "--source") and i + 1 < len(head):
            source, i = head[i + 1], i + 2
            continue
        if a.startswith("--source="):
            source = a.split("=", 1)[1]
        elif a in ("-p", "--patch"):
            partial = True
        elif not a.startswith("-"):
            pos.append(a)
        i += 1
    if verb == "checkout" and dash is not None and pos:
        source = pos[0]
    elif verb == "checkout" and pos:
        looks_like_path = [
            p
            for p in pos
            if p == "." or p.endswith("/") or "." in posixpath.basename(p) or _norm(p) in files
        ]
        if len(looks_like_path) < len(pos) and pos[0] not in looks_like_path:
            source, pos = pos[0], pos[1:]
            if not pos:
                return [Write("")]  # a branch or commit switch
        paths = pos
    else:
        paths = paths or pos
    if not paths:
        return [Write("")] if verb == "checkout" else []
    if partial or (source is not None and source not in _HEAD):
        return [Write(_norm(p)) if _norm(p) != "." else Write("") for p in paths]
    return [Write(_norm(p), revert=True) for p in paths]


def _segment(tokens: list[str], files: dict[str, str | None]) -> list[Write]:
    if not tokens:
        return []
    prog, args = posixpath.basename(tokens[0]), tokens[1:]
    if prog == "sed" and any(a.startswith("-i") or a == "--in-place" for a in args):
        extended = any(a in ("-E", "-r", "--regexp-extended") for a in args)
        scripts, paths, i = [], [], 0
        while i < len(args):
            a = args[i]
            if a in ("-e", "--expression") and i + 1 < len(args):
                scripts.append(args[i + 1])
                i += 2
                continue
            if not a.startswith("-"):
                paths.append(a)
            i += 1
        if not scripts and paths:
            scripts.append(paths.pop(0))
        out = []
        for p in map(_norm, paths):
            text = files.get(p)
            for sc in scripts:
                text = _sed_apply(sc, text, extended) if text is not None else None
            out.append(Write(p, text))
        return out
    if prog in ("cp", "mv", "install") and len([a for a in args if not a.startswith("-")]) >= 2:
        pos = [_norm(a) for a in args if not a.startswith("-")]
        dst = pos[-1]
        out = []
        for src in pos[:-1]:
            target = (
                posixpath.join(dst, posixpath.basename(src))
                if (
                    dst in (".", "..")
                    or args[-1].endswith("/")
                    or ("." not in posixpath.basename(dst) and "." in posixpath.basename(src))
                )
                else dst
            )
            out.append(Write(target, files.get(src)))
            if prog == "mv":
                out.append(Write(src, deleted=True))
        return out
    if prog == "rm":
        return [Write(_norm(a), deleted=True) for a in args if not a.startswith("-")]
    if prog == "git" and args[:1] in (["checkout"], ["restore"]):
        return _git_checkout(args[0], args[1:], files)
    if prog == "git" and args[:1] == ["stash"] and (len(args) == 1 or args[1] in ("push", "save")):
        return [Write("", revert=True)]
    if prog == "git" and args[:2] in (["stash", "pop"], ["stash", "apply"]):
        return [Write("", restore=True)]
    if prog == "git" and args[:1] == ["reset"] and "--hard" in args:
        revs = [a for a in args[1:] if not a.startswith("-")]
        return [Write("", revert=True) if revs in ([], ["HEAD"], ["@"]) else Write("")]
    if (prog == "git" and args[:1] and args[0] in _GIT_WRITERS) or prog == "patch":
        return [Write("")]  # files changed, which ones the command does not say
    if _PY.match(prog) and "-c" in args and args.index("-c") + 1 < len(args):
        return _py_writes(args[args.index("-c") + 1], files)
    if prog == "touch":
        return [Write(_norm(a), files.get(_norm(a), "")) for a in args if not a.startswith("-")]
    return []


def writes(command: str, files: dict[str, str | None]) -> list[Write]:
    """Every file effect of one shell command, in order. ``files``: the texts known so far
    (path -> text, None when unknown); it is not changed here."""
    out: list[Write] = []
    lines = command.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        body: str | None = None
        m = _HEREDOC.search(line)
        if m:
            end = m.group(2)
            j = i + 1
            buf = []
            while j < len(lines) and lines[j].strip() != end:
                buf.append(lines[j])
                j += 1
            body = "\n".join(buf) + "\n"
            i = j
            head = line[: m.start()] + line[m.end() :]
        else:
            head = line
        i += 1
        for seg in re.split(r"&&|\|\||;", head):
            stages = [s.strip() for s in seg.split("|")]
            for k, stage in enumerate(stages):
                try:
                    tokens = shlex.split(stage, comments=True)
                except ValueError:
                    tokens = stage.split()
                redirects = _REDIRECT.findall(re.sub(r"\d*>&\d+", " ", stage))
                plain = [
                    t
                    for t in tokens
                    if not t.startswith(">")
                    and t not in {r[1] for r in redirects}
                    and not re.fullmatch(r"\d*>&?\d*", t)
                ]
                prog = posixpath.basename(plain[0]) if plain else ""
                if (
                    body is not None
                    and k == 0
                    and _PY.match(prog)
                    and ("-" in plain[1:] or len(plain) == 1)
                ):
                    out += _py_writes(body, files)
                if prog == "tee" and body is not None:
                    out += [Write(_norm(a), body) for a in plain[1:] if not a.startswith("-")]
                elif prog == "tee":
                    out += [Write(_norm(a)) for a in plain[1:] if not a.startswith("-")]
                for op, target in redirects:
                    t = _norm(target)
                    if t.startswith("/dev/"):
                        continue
                    text: str | None = None
                    if prog == "cat" and body is not None and len(plain) == 1:
                        text = body
                    elif prog == "echo" and "$" not in stage and "`" not in stage:
                        text = " ".join(a for a in plain[1:] if a not in ("-e", "-n")) + "\n"
                    if op == ">>":
                        prev = files.get(t, "") if t in files else None
                        text = prev + text if prev is not None and text is not None else None
                    out.append(Write(t, text))
                out += _segment(plain, files)
    return out
