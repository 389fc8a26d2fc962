"""The jail when the server itself is not root (no launcher): the same limits hold.

The rest of this suite runs as the test runner's user, root in CI, so it goes through the launcher.
Here a small server script runs as an ordinary uid, under a system Python of the same version (the
test runner's own interpreter may sit where that uid cannot reach it, such as pyenv under /root).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from django.conf import settings

from memory_app.sandbox import limits
from memory_app.sandbox.runtime import reachable_by_others

SERVER_UID = SERVER_GID = 1000
SYSTEM_PYTHON = shutil.which(f"python{sys.version_info.major}.{sys.version_info.minor}", path="/usr/bin")
SITE_PACKAGES = str(Path(pytest.__file__).resolve().parent.parent)
SCRIPT = textwrap.dedent(
    """
    import asyncio, json, os
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    os.environ["PALIMPSEST_DEV"] = "1"
    import django
    django.setup()
    from memory_app.sandbox.jail import sandbox_available, sandbox_run

    class Notepad:
        content = ""
        async def read(self): return self.content
        async def write(self, content): self.content = content
        async def append(self, text): self.content += text

    CODE = '''
    import os, time
    forked = 0
    try:
        while True:
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
            forked += 1
    except OSError:
        pass
    caps = [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")]
    print(forked, os.getuid(), caps[0])
    session.notepad.append("noted")
    '''

    async def main():
        notepad = Notepad()
        result = await sandbox_run(code=CODE, timeout_seconds=30, memory_mb=256, notepad=notepad)
        print(json.dumps({"available": sandbox_available(), "uid": os.getuid(), "stdout": result.stdout,
                          "exit_code": result.exit_code, "notepad": notepad.content}))

    asyncio.run(main())
    """
)


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "the test runner is not root, so the whole suite already runs without the launcher"
    if SYSTEM_PYTHON is None:
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        return f"no /usr/bin/python{version} to run the server as uid {SERVER_UID}"
    for path in (os.path.realpath(SYSTEM_PYTHON), str(settings.BASE_DIR), SITE_PACKAGES):
        if not reachable_by_others(path + "/x"):
            return f"{path} is out of reach of an ordinary uid"
    return None


@pytest.mark.skipif(_why_not() is not None, reason=str(_why_not()))
def test_a_server_running_as_an_ordinary_user_gets_the_same_jail() -> None:
    directory = tempfile.mkdtemp(prefix="palimpsest-nonroot-")
    try:
        os.chmod(directory, 0o755)
        script = Path(directory) / "server.py"
        script.write_text(SCRIPT)
        done = subprocess.run(
            [str(SYSTEM_PYTHON), str(script)],
            env={
                "PATH": "/usr/bin:/bin",
                "HOME": directory,
                "PYTHONPATH": f"{settings.BASE_DIR}:{SITE_PACKAGES}",
                "PALIMPSEST_SQLITE_PATH": os.path.join(directory, "db.sqlite3"),
            },
            user=SERVER_UID,
            group=SERVER_GID,
            extra_groups=[],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        shutil.rmtree(directory)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["available"] is True and report["uid"] == SERVER_UID and report["exit_code"] == 0
    assert report["stdout"] == f"{limits.SANDBOX_MAX_PROCESSES - 2} {limits.SANDBOX_UID} 0000000000000000\n"
    assert report["notepad"] == "noted"
