"""Showing a Python install inside a sandbox at a neutral path only.

A sandbox mounts the host's base Python install (``sys.base_prefix``, e.g.
``/root/.pyenv/versions/3.11.7``) at a fixed path such as ``/run/verigap/python`` instead of
its own, so no listing, ``/proc/self/maps`` or ``sys.base_prefix`` inside names the host's
layout. Python itself finds its prefix from where its executable sits (landmarks next to
it), so it runs from any mount point. What does not move with it is the dynamic linker's
search for ``libpython``: an interpreter built with ``--enable-shared`` usually carries an
absolute ``RUNPATH`` naming the host prefix (``readelf -d python3.11``). For such an
interpreter :func:`install_binds` mounts, over it, a copy whose ``RUNPATH`` entries into the
install are rewritten relative to the executable (``$ORIGIN/../lib``, the rewrite
``patchelf --set-rpath`` does; done in place, it never grows the file), checked by running
it once. No environment variable (``LD_LIBRARY_PATH``) is needed, so what code inside can
observe does not change.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

_DT_NULL, _DT_STRTAB, _DT_RPATH, _DT_RUNPATH = 0, 5, 15, 29
_PT_LOAD, _PT_DYNAMIC = 1, 2


def venv_base(env: Path) -> Path | None:
    """The base install a virtualenv at ``env`` was made from (its pyvenv.cfg ``home``'s
    parent, resolved), or None when ``env`` is not a virtualenv."""
    try:
        cfg = (Path(env) / "pyvenv.cfg").read_text()
    except OSError:
        return None
    for line in cfg.splitlines():
        k, sep, v = line.partition("=")
        if sep and k.strip() == "home":
            home = Path(v.strip()).resolve()
            return home.parent if home.name == "bin" else home
    return None


def _runpaths(data: bytes) -> list[tuple[int, bytes]]:
    """(file offset, value) of each DT_RUNPATH / DT_RPATH string of a 64-bit little-endian
    ELF file; [] for anything else (a script, a static or foreign binary)."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return []
    (phoff,) = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    loads, dynamic = [], None
    for i in range(phnum):
        off = phoff + i * phentsize
        if off + 56 > len(data):
            return []
        p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", data, off)
        if p_type == _PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == _PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)
    if dynamic is None:
        return []
    strtab, paths = None, []
    for off in range(dynamic[0], min(dynamic[0] + dynamic[1], len(data) - 15), 16):
        tag, val = struct.unpack_from("<qQ", data, off)
        if tag == _DT_NULL:
            break
        if tag == _DT_STRTAB:
            strtab = next((val - v + o for v, o, n in loads if v <= val < v + n), None)
        elif tag in (_DT_RPATH, _DT_RUNPATH):
            paths.append(val)
    if strtab is None:
        return []
    out = []
    for val in paths:
        start = strtab + val
        end = data.find(b"\0", start)
        if start < len(data) and end > 0:
            out.append((start, data[start:end]))
    return out


def _relocated(data: bytes, exe_dir: Path, base: Path) -> bytes | None:
    """``data`` (an ELF file in ``exe_dir`` under ``base``) with every RUNPATH entry into
    ``base`` made ``$ORIGIN``-relative; the same bytes when none is; None when a rewritten
    string would not fit where the old one was."""
    out = bytearray(data)
    for start, value in _runpaths(data):
        entries = value.decode("utf-8", "surrogateescape").split(":")
        new = []
        for e in entries:
            p = Path(e).resolve() if e.startswith("/") else None
            if p is not None and (p == base or p.is_relative_to(base)):
                e = "$ORIGIN/" + os.path.relpath(p, exe_dir)
            new.append(e)
        raw = ":".join(new).encode("utf-8", "surrogateescape")
        if len(raw) > len(value):
            return None
        out[start : start + len(value)] = raw + b"\0" * (len(value) - len(raw))
    return bytes(out)


def _cache_root() -> Path:
    return Path(os.environ.get("VERIGAP_CACHE", Path.home() / ".cache" / "verigap")) / "sandbox"


def _relocated_copy(exe: Path, base: Path, data: bytes, new: bytes) -> Path | None:
    """A copy of ``exe`` holding ``new``, in the cache, checked by starting it once from a
    directory laid out like ``base``; None when it does not start."""
    key = hashlib.sha256(data + b"\0" + new).hexdigest()[:24]
    root = _cache_root() / "python" / key
    rel = exe.relative_to(base)
    dest = root / rel
    if dest.is_file():
        return dest
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="build-", dir=root.parent))
    try:
        tmp.chmod(0o755)
        (tmp / rel).parent.mkdir(parents=True, mode=0o755)
        (tmp / rel).write_bytes(new)
        (tmp / rel).chmod(0o755)
        # the layout the copy will be mounted in: the install's other top-level entries
        # beside it (removed again: the mount provides them)
        links = [tmp / e.name for e in base.iterdir() if e.name != rel.parts[0]]
        for link in links:
            link.symlink_to(base / link.name)
        done = subprocess.run(
            [str(tmp / rel), "-I", "-S", "-c", "pass"],
            env={"LD_BIND_NOW": "1", "PATH": "/usr/bin:/bin"},
            capture_output=True,
            timeout=60,
        )
        for link in links:
            link.unlink()
        if done.returncode != 0:
            return None
        try:
            tmp.rename(root)
        except OSError:  # another process made it first
            pass
        return dest if dest.is_file() else None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


_MEMO: dict[tuple[Path, str, Path], dict[Path, str] | None] = {}


def install_binds(base: Path, dest: str) -> dict[Path, str] | None:
    """Read-only mounts that show the Python install ``base`` at ``dest``, runnable there
    without ``base`` at its own path: ``{base: dest}`` plus, for each interpreter
    (``bin/python*``) whose RUNPATH names ``base``, a relocated copy mounted over it. None
    when one cannot be relocated (then ``base`` must stay visible at its own path too).
    Remembered per process (a sandbox is made per episode)."""
    base = Path(base).resolve()
    key = (base, dest, _cache_root())
    known = _MEMO.get(key, ())
    if known != () and (known is None or all(p.exists() for p in known)):
        return known
    binds: dict[Path, str] | None = {base: dest}
    bindir = base / "bin"
    for f in sorted(bindir.glob("python*")) if bindir.is_dir() else []:
        if f.is_symlink() or not f.is_file():
            continue
        data = f.read_bytes()
        new = _relocated(data, bindir, base)
        copy = None if new is None else f if new == data else _relocated_copy(f, base, data, new)
        if copy is None:
            binds = None
            break
        if copy != f:
            binds[copy] = f"{dest}/{f.relative_to(base).as_posix()}"
    _MEMO[key] = binds
    return binds
