"""Runs as root, between the server and bubblewrap, only when the server itself runs as root.

Started as `python -I -S -B -c <this source> <config json> <bwrap> <bwrap args...>`. Standard library
only: it is not imported by the server, and after dropping privileges it may not be able to read the
standard library any more (pyenv under /root), so everything is imported first.

Rules, in this order:
1. If the config names staged paths: enter a private mount namespace (the host's mounts never see
   it) and bind each staged source onto its empty mount point, so `nobody` can reach the runtime.
2. Drop to the sandbox uid/gid for good: no supplementary groups, real = effective = saved ids.
3. Set no_new_privs: nothing exec'd later (a setuid bwrap included) can gain privileges.
4. exec bubblewrap (an absolute path: no PATH lookup). Inherited descriptors stay open.
On any failure: a message on stderr and exit code 127, before anything of the user's runs.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

CLONE_NEWNS = 0x00020000
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
PR_SET_NO_NEW_PRIVS = 38
LAUNCH_FAILED_EXIT = 127


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def main() -> None:
    config = json.loads(sys.argv[1])
    command = sys.argv[2:]
    libc = ctypes.CDLL(None, use_errno=True)
    staged: list[list[str]] = config["stage"]
    if staged:
        _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        _check(
            libc.mount(None, b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None), "mount --make-rprivate /"
        )
        for source, point in staged:
            flags = ctypes.c_ulong(MS_BIND | MS_REC)
            _check(libc.mount(source.encode(), point.encode(), None, flags, None), f"bind {source}")
    uid, gid = int(config["uid"]), int(config["gid"])
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid) or os.getgroups():
        raise OSError("the privilege drop did not hold")
    one, zero = ctypes.c_ulong(1), ctypes.c_ulong(0)
    _check(libc.prctl(ctypes.c_int(PR_SET_NO_NEW_PRIVS), one, zero, zero, zero), "no_new_privs")
    os.execv(command[0], command)


if __name__ == "__main__":
    try:
        main()
    except (OSError, ValueError, KeyError, IndexError) as exc:
        os.write(2, f"palimpsest sandbox launcher: {exc}\n".encode(errors="replace"))
        os._exit(LAUNCH_FAILED_EXIT)
