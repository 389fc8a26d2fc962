"""What of the host the jail sees: the Python runtime and its standard library, nothing else.

Rules:
- Bound read-only at their own paths: the real interpreter binary, the standard library directories
  and the shared libraries the interpreter and the standard library's extension modules link against
  (found with `ldd`). Not the server's virtualenv, not the project, not the database, not /etc.
- The base installation's site-packages directories are hidden under an empty read-only tmpfs.
- Top-level symlinks such as `/lib -> usr/lib` are recreated, so library paths resolve as on the host.
- When the server runs as root the jail is started as `nobody`, who may not be able to reach the
  runtime (pyenv under /root is 0700): such paths are "staged" by the launcher, which binds them onto
  empty mount points in a private tempdir inside its own mount namespace (see launcher.py).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from memory_app.sandbox.errors import SandboxError

# Top-level directories a merged-/usr host has as symlinks (e.g. /lib64 -> usr/lib64).
TOP_LEVEL_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# glibc loads this one with dlopen() (thread cancellation), so `ldd` does not list it.
DLOPENED_LIBRARIES = ("libgcc_s.so.1",)
LDD_TIMEOUT_SECONDS = 60

logger = logging.getLogger("palimpsest")


@dataclass(frozen=True)
class Bind:
    """One read-only bind: host `source` appears at `dest` inside the jail."""

    source: str
    dest: str
    is_dir: bool


@dataclass(frozen=True)
class RuntimeView:
    interpreter: str
    binds: tuple[Bind, ...]
    masks: tuple[str, ...]
    symlinks: tuple[tuple[str, str], ...]  # (target, link path)


def _real_interpreter() -> str:
    path = os.path.realpath(sys.executable)
    if not os.path.isfile(path):
        raise SandboxError(f"the interpreter {sys.executable!r} is not a file")
    return path


def _stdlib_dirs() -> list[str]:
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix, "installed_base": sys.base_prefix}
    paths = sysconfig.get_paths(vars=base)
    dirs = {os.path.realpath(paths[key]) for key in ("stdlib", "platstdlib")}
    dynload = os.path.join(os.path.realpath(paths["platstdlib"]), "lib-dynload")
    if os.path.isdir(dynload):
        dirs.add(os.path.realpath(dynload))
    return sorted(d for d in dirs if os.path.isdir(d))


def _site_dirs() -> list[str]:
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix, "installed_base": sys.base_prefix}
    paths = sysconfig.get_paths(vars=base)
    return sorted({os.path.realpath(paths[k]) for k in ("purelib", "platlib") if os.path.isdir(paths[k])})


def _extension_modules(stdlib_dirs: list[str]) -> list[str]:
    found: set[str] = set()
    for directory in stdlib_dirs:
        for pattern in ("*.so", "lib-dynload/*.so"):
            found |= {str(p) for p in Path(directory).glob(pattern)}
    return sorted(found)


def _ldd_libraries(files: list[str]) -> set[str]:
    """Absolute paths of every shared library `files` need, as the dynamic loader finds them."""
    ldd = shutil.which("ldd")
    if ldd is None:
        raise SandboxError("`ldd` is missing (Debian package libc-bin)")
    out = subprocess.run(
        [ldd, *files],
        capture_output=True,
        text=True,
        timeout=LDD_TIMEOUT_SECONDS,
        env={"PATH": os.defpath, "LC_ALL": "C"},
        check=False,
    ).stdout
    libraries: set[str] = set()
    for line in out.splitlines():
        parts = line.split()
        if "=>" in parts:
            target = parts[parts.index("=>") + 1]
        elif parts and parts[0].startswith("/") and not parts[0].endswith(":"):
            target = parts[0]  # the dynamic loader itself
        else:
            continue
        if target.startswith("/") and os.path.isfile(target):
            libraries.add(target)
    return libraries


def _library_dest(path: str) -> str:
    """Where a library goes inside: its directory resolved (so /lib/x -> /usr/lib/x), its name kept."""
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def _within(path: str, directories: list[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in directories)


@functools.cache
def runtime_view() -> RuntimeView:
    """The jail's file system view for this server's interpreter; computed once per process."""
    interpreter = _real_interpreter()
    stdlib = _stdlib_dirs()
    if not stdlib:
        raise SandboxError("the standard library directory was not found")
    libraries = _ldd_libraries([interpreter, *_extension_modules(stdlib)])
    libc_dirs = {os.path.dirname(p) for p in libraries if os.path.basename(p).startswith("libc.so")}
    for directory in libc_dirs:
        libraries |= {os.path.join(directory, n) for n in DLOPENED_LIBRARIES}
    binds = [Bind(interpreter, interpreter, False)] + [Bind(d, d, True) for d in _outermost(stdlib)]
    covered = [b.dest for b in binds if b.is_dir]
    for library in sorted(p for p in libraries if os.path.isfile(p)):
        dest = _library_dest(library)
        if not _within(dest, covered) and dest not in {b.dest for b in binds}:
            binds.append(Bind(library, dest, False))
    masks = tuple(d for d in _site_dirs() if _within(d, covered))
    links = tuple((os.readlink(p), p) for p in TOP_LEVEL_LINKS if os.path.islink(p))
    return RuntimeView(interpreter=interpreter, binds=tuple(binds), masks=masks, symlinks=links)


def _outermost(directories: list[str]) -> list[str]:
    """Drop directories that lie inside another one of the list."""
    result: list[str] = []
    for d in sorted(directories, key=len):
        if not _within(d, result):
            result.append(d)
    return result


def reachable_by_others(path: str) -> bool:
    """Whether a user with no relation to the owner can reach `path`: every ancestor has o+x."""
    current = Path(path).parent
    while True:
        if not current.stat().st_mode & stat.S_IXOTH:
            return False
        if current == current.parent:
            return True
        current = current.parent


def stage_create(*, view: RuntimeView, stage_dir: str) -> dict[str, str]:
    """Empty mount points in `stage_dir` for every bind source `nobody` cannot reach.

    Returns {source: mount point}. `stage_dir` must be a fresh directory of the server's; it is made
    traversable (0711: `nobody` can pass, not list) and holds only the empty mount points.
    """
    staged: dict[str, str] = {}
    for number, bind in enumerate(view.binds):
        if reachable_by_others(bind.source):
            continue
        point = os.path.join(stage_dir, str(number))
        if bind.is_dir:
            os.mkdir(point, 0o755)
        else:
            os.close(os.open(point, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o644))
        staged[bind.source] = point
    if staged:
        os.chmod(stage_dir, 0o711)
    return staged


def tree_remove(path: str) -> None:
    """Remove a directory tree without ever following a symlink found in it.

    `shutil.rmtree` works through directory file descriptors (`avoids_symlink_attacks` on Linux): a
    symlink inside is unlinked, never entered, and nothing is chmod-ed or chown-ed.
    """
    if not shutil.rmtree.avoids_symlink_attacks:  # pragma: no cover - Linux always has it
        raise SandboxError("this platform's rmtree may follow symlinks")
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        pass
    except OSError:
        logger.warning("sandbox: could not remove %s", path, exc_info=True)
