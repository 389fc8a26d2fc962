"""Whether the process holding a lease is known gone (`common.processes`): only on this host
(hostname and pid namespace), when its pid is gone or only its zombie is left."""

from __future__ import annotations

import os
import subprocess
import sys

from sessions_app.common.processes import process_gone, process_host


def _exited_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=30)
    return child.pid


def test_this_process_is_not_gone():
    assert not process_gone(host=process_host(), pid=os.getpid())


def test_a_live_process_of_this_host_is_not_gone():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert not process_gone(host=process_host(), pid=child.pid)
    finally:
        child.kill()
        child.wait(timeout=30)


def test_a_process_of_this_host_that_exited_is_gone():
    assert process_gone(host=process_host(), pid=_exited_pid())


def test_a_killed_process_not_yet_reaped_is_gone():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    child.kill()
    try:
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, left a zombie
        assert process_gone(host=process_host(), pid=child.pid)
    finally:
        child.wait(timeout=30)


def test_a_process_of_another_host_is_never_known_gone():
    assert not process_gone(host="elsewhere " + process_host(), pid=_exited_pid())


def test_a_lease_without_host_or_pid_is_never_known_gone():
    assert not process_gone(host="", pid=_exited_pid())
    assert not process_gone(host=process_host(), pid=None)


def test_the_host_names_the_hostname():
    import socket

    assert process_host().startswith(socket.gethostname())
