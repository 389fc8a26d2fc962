"""The argv that starts one jailed run: bubblewrap's options, the launcher when root, the bootstrap.

Rules (docs/sandbox.md gives the reasons):
- Every namespace unshared (`--unshare-all` plus a mandatory `--unshare-user`): no network at all
  (only the jail's own, empty loopback), its own pids, IPC, hostname and cgroup view.
- Never root, never a capability: `--uid/--gid` nobody, `--cap-drop ALL`, `--disable-userns` (no
  nested user namespace, where the code would be root again), `--new-session` (no TIOCSTI into a tty),
  `--die-with-parent`. As root, the launcher runs bubblewrap itself as nobody too.
- An empty environment (`--clearenv`) plus PATH, HOME, TMPDIR, LANG and PYTHON* flags; the host side
  gets an empty environment as well, so no secret of the server reaches even bubblewrap.
- A read-only root: the runtime binds (runtime.py), /proc of the jail's pid namespace, a minimal /dev
  (read-only, but for a small /dev/shm), a size-capped tmpfs at /tmp as the working directory.
- The interpreter runs isolated (`-I`: no environment variables, no user site), without `site`
  (`-S`) and without writing bytecode (`-B`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from importlib import resources

from memory_app.sandbox import limits
from memory_app.sandbox.runtime import RuntimeView

# The host-side environment of bubblewrap (and of the launcher): nothing of the server's.
HOST_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
JAIL_TMP = "/tmp"
PYTHON_FLAGS = ("-I", "-S", "-B", "-X", "utf8")


@dataclass(frozen=True)
class JailConfig:
    """One run's parameters for the bootstrap inside."""

    timeout_seconds: int
    memory_mb: int
    request_fd: int | None = None
    reply_fd: int | None = None
    max_line_bytes: int = 0
    ready_fd: int | None = None
    stage: dict[str, str] = field(default_factory=dict)
    # A call of an authored tool: the pipe its outcome goes back on (None: a plain run).
    result_fd: int | None = None


def _source(name: str) -> str:
    return resources.files("memory_app.sandbox").joinpath(name).read_text(encoding="utf-8")


def rlimits(*, timeout_seconds: int, memory_mb: int) -> list[tuple[str, int, int]]:
    """The resource limits the bootstrap applies (soft, hard) before running the code."""
    cpu = timeout_seconds
    return [
        ("RLIMIT_CPU", cpu, cpu + limits.SANDBOX_CPU_GRACE_SECONDS),
        ("RLIMIT_AS", memory_mb * 1024 * 1024, memory_mb * 1024 * 1024),
        ("RLIMIT_NPROC", limits.SANDBOX_MAX_PROCESSES, limits.SANDBOX_MAX_PROCESSES),
        ("RLIMIT_NOFILE", limits.SANDBOX_MAX_OPEN_FILES, limits.SANDBOX_MAX_OPEN_FILES),
        ("RLIMIT_FSIZE", limits.SANDBOX_MAX_FILE_BYTES, limits.SANDBOX_MAX_FILE_BYTES),
        ("RLIMIT_CORE", 0, 0),
    ]


def _filesystem(view: RuntimeView, stage: dict[str, str]) -> list[str]:
    args: list[str] = []
    for bind in view.binds:
        args += ["--ro-bind", stage.get(bind.source, bind.source), bind.dest]
    for mask in view.masks:
        args += ["--size", "4096", "--tmpfs", mask, "--remount-ro", mask]
    for target, link in view.symlinks:
        args += ["--symlink", target, link]
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--size", str(limits.SANDBOX_SHM_BYTES), "--perms", "1777", "--tmpfs", "/dev/shm"]
    args += ["--remount-ro", "/dev"]
    args += ["--size", str(limits.SANDBOX_TMP_BYTES), "--perms", "1777", "--tmpfs", JAIL_TMP]
    args += ["--chdir", JAIL_TMP, "--remount-ro", "/"]
    return args


def _environment(view: RuntimeView) -> list[str]:
    env = {
        "PATH": os.path.dirname(view.interpreter),
        "HOME": JAIL_TMP,
        "TMPDIR": JAIL_TMP,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUTF8": "1",
    }
    args = ["--clearenv"]
    for name, value in env.items():
        args += ["--setenv", name, value]
    return args


def jail_command(*, bwrap: str, view: RuntimeView, config: JailConfig) -> list[str]:
    """The full argv (an argv list: never a shell) for one run under `bwrap`."""
    bootstrap_config = {
        "notepad": config.request_fd is not None,
        "request_fd": config.request_fd,
        "reply_fd": config.reply_fd,
        "max_line_bytes": config.max_line_bytes,
        "ready_fd": config.ready_fd,
        "result_fd": config.result_fd,
        "result_max_bytes": limits.SANDBOX_CALL_RESULT_MAX_BYTES,
        "nice": limits.SANDBOX_NICE,
        "limits": rlimits(timeout_seconds=config.timeout_seconds, memory_mb=config.memory_mb),
    }
    argv = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--uid",
        str(limits.SANDBOX_UID),
        "--gid",
        str(limits.SANDBOX_GID),
        "--hostname",
        limits.SANDBOX_HOSTNAME,
        "--cap-drop",
        "ALL",
        *_environment(view),
        *_filesystem(view, config.stage),
    ]
    argv += [view.interpreter, *PYTHON_FLAGS, "-c", _source("bootstrap.py"), json.dumps(bootstrap_config)]
    if os.geteuid() != 0:
        return argv
    launcher_config = {
        "uid": limits.SANDBOX_UID,
        "gid": limits.SANDBOX_GID,
        "stage": sorted(config.stage.items()),
    }
    return [view.interpreter, *PYTHON_FLAGS, "-c", _source("launcher.py"), json.dumps(launcher_config), *argv]
