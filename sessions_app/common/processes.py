"""Which process holds a turn's lease, and whether that process is known to be gone.

A lease records the host and pid of the process that holds it (`process_host`, `os.getpid`).
Another process on the same host can tell at once that the holder died (its pid is gone) and
take its turn over without waiting for the lease to run out. A pid means something only on its
own host and in its own pid namespace (containers on one machine share a hostname when they
share its network), so "the same host" is the hostname and the pid namespace together; a holder
anywhere else is never known gone, and its lease is waited for.
"""

from __future__ import annotations

import functools
import os
import socket


@functools.cache
def process_host() -> str:
    """This process's host as a lease records it: the hostname, then the pid namespace where
    Linux names it (`/proc/self/ns/pid`), so that pids are compared only where they mean the
    same process. At most 255 characters (the lease's column)."""
    host = socket.gethostname()
    try:
        namespace = os.readlink("/proc/self/ns/pid")  # e.g. "pid:[4026531836]"
    except OSError:
        namespace = ""
    return f"{host} {namespace}".strip()[:255]


def process_gone(*, host: str, pid: int | None) -> bool:
    """Whether the process `pid` of `host` (as `process_host` names hosts) is known to be gone:
    it ran on this host and no process has its pid any more (`os.kill(pid, 0)` finds none), or
    only its zombie is left (it died, and its parent has not reaped it yet). False when unsure:
    another host, no pid recorded, or a process we may not signal (it exists)."""
    if not host or pid is None or pid <= 0 or host != process_host():
        return False
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # PermissionError: a process of another user has that pid
        return False
    return _zombie(pid)


def _zombie(pid: int) -> bool:
    """Whether `pid` is a zombie (Linux's /proc; elsewhere: not known, so no)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # "pid (comm) S ...": the state follows the last ')' (comm may hold one).
            return stat.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False
