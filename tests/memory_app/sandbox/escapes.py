"""Escape attempts that need nothing set up on the host: a program, and the one output that shows
the attempt failed. Shared by the jail's own tests (`test_sandbox_escapes.py`) and the authored
tools' (`tests/memory_app/authored_tools/test_authored_tools_escapes.py`), which run each again
inside a tool's `run(args, session)`."""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass

from memory_app.sandbox import limits

STDLIB = os.path.dirname(os.__file__)


@dataclass(frozen=True)
class Escape:
    id: str
    code: str
    # The program's stdout when the jail held; or, with `prefix`, how it begins.
    stdout: str
    prefix: bool = False
    # A host path the attempt tried to create: it must not exist afterwards.
    host_absent: str = ""

    def held(self, stdout: str) -> bool:
        return stdout.startswith(self.stdout) if self.prefix else stdout == self.stdout


def _write_outside(directory: str) -> Escape:
    target = os.path.join(directory, "palimpsest-escape")
    code = f"try:\n    open({target!r}, 'w').write('x')\n    print('written')\nexcept OSError as exc:\n"
    code += "    print('refused')"
    return Escape(f"write-{directory}", code, "refused\n", host_absent=target)


ESCAPES: list[Escape] = [
    Escape(
        "etc-invisible",
        "import json, os\nprint(json.dumps([p for p in ['/etc', '/etc/passwd', '/etc/shadow', "
        "'/etc/hostname', '/etc/resolv.conf'] if os.path.lexists(p)]))",
        "[]\n",
    ),
    Escape(
        "environment-is-the-jails",
        "import json, os\nprint(json.dumps(sorted(os.environ)))",
        '["HOME", "LANG", "PATH", "PWD", "PYTHONDONTWRITEBYTECODE", "PYTHONUTF8", "TMPDIR"]\n',
    ),
    Escape(
        "server-processes-invisible",
        textwrap.dedent(
            """
            import os
            pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
            print(pids, any(b"pytest" in open(f"/proc/{p}/cmdline", "rb").read() for p in pids))
            """
        ),
        "[1, 2] False\n",  # bubblewrap's init and the program
    ),
    Escape(
        "outside-address-no-route",
        "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 80), timeout=10)\n"
        "except OSError as exc:\n    print(exc.errno, exc.strerror)",
        "101 Network is unreachable\n",
    ),
    Escape("only-own-loopback", "import socket\nprint(socket.if_nameindex())", "[(1, 'lo')]\n"),
    *[_write_outside(d) for d in ("/", "/usr/lib", STDLIB, "/dev", "/proc/sys/kernel", "/root")],
    Escape(
        "remount-read-only-fails",
        textwrap.dedent(
            f"""
            import ctypes, os
            libc = ctypes.CDLL(None, use_errno=True)
            MS_REMOUNT, MS_BIND = 32, 4096
            for target in ("/", {STDLIB!r}):
                result = libc.mount(None, target.encode(), None, ctypes.c_ulong(MS_REMOUNT | MS_BIND), None)
                print(target, result, os.strerror(ctypes.get_errno()))
            try:
                open({STDLIB!r} + "/x", "w")
            except OSError as exc:
                print(exc.strerror)
            """
        ),
        f"/ -1 Operation not permitted\n{STDLIB} -1 Operation not permitted\nRead-only file system\n",
    ),
    Escape(
        "no-mount-binary",
        "import shutil, os\n"
        "print(shutil.which('mount'), os.path.exists('/bin/mount'), os.path.exists('/usr/bin'))",
        "None False False\n",
    ),
    Escape(
        "no-capability",
        "print(''.join(l for l in open('/proc/self/status') if l.startswith('Cap')), end='')",
        "".join(f"{n}:\t0000000000000000\n" for n in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")),
    ),
    Escape(
        "not-root-cannot-become-root",
        "import os\nprint(os.getuid(), os.geteuid(), os.getgid())\ntry:\n    os.setuid(0)\n"
        "except OSError as exc:\n    print('setuid refused:', exc.strerror)",
        f"{limits.SANDBOX_UID} {limits.SANDBOX_UID} {limits.SANDBOX_GID}\nsetuid refused: Invalid argument\n",
    ),
    Escape(
        "no-new-privileges",
        "print([l for l in open('/proc/self/status') if l.startswith('NoNewPrivs')][0], end='')",
        "NoNewPrivs:\t1\n",
    ),
    Escape(
        "no-user-namespace-inside",
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.unshare(0x10000000), os.strerror(ctypes.get_errno()))",  # CLONE_NEWUSER
        "-1 ",
        prefix=True,
    ),
]
