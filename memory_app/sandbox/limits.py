"""Every limit of the code sandbox, in one place (docs/sandbox.md explains each).

Per-run values (`timeout_seconds`, `memory_mb`) come from the session's `settings.sandbox`; they are
checked against the bounds here. The rest hold for every run.
"""

from __future__ import annotations

# -- who runs the code -------------------------------------------------------------------------
# "nobody": inside the jail, and on the host when the server runs as root (the launcher drops to it),
# so that RLIMIT_NPROC is enforced (the kernel never enforces it for host uid 0).
SANDBOX_UID = 65534
SANDBOX_GID = 65534
SANDBOX_HOSTNAME = "sandbox"

# -- per-run values: defaults of `settings.sandbox` (PROTOCOL.md v1.1) and the bounds they must keep ----
SANDBOX_DEFAULT_TIMEOUT_SECONDS = 30
SANDBOX_MIN_TIMEOUT_SECONDS = 1
SANDBOX_MAX_TIMEOUT_SECONDS = 600
SANDBOX_DEFAULT_MEMORY_MB = 512
# Python itself needs some 30 MB of address space to start.
SANDBOX_MIN_MEMORY_MB = 64
SANDBOX_MAX_MEMORY_MB = 4096

# -- the same for every run --------------------------------------------------------------------
# Sandboxes running at once in one server process; further runs wait for a place.
SANDBOX_MAX_CONCURRENT = 4
# Processes and threads of one run (RLIMIT_NPROC, counted in the run's own user namespace), bubblewrap's
# own init and the bootstrap included. Each process may use `memory_mb` of address space.
SANDBOX_MAX_PROCESSES = 16
SANDBOX_MAX_OPEN_FILES = 256
# Largest file the code may write (RLIMIT_FSIZE); the temp directory as a whole is capped below.
SANDBOX_MAX_FILE_BYTES = 32 * 1024 * 1024
# The private temp directory (/tmp, also the working directory and HOME) and /dev/shm: tmpfs of
# this size, gone with the jail.
SANDBOX_TMP_BYTES = 64 * 1024 * 1024
SANDBOX_SHM_BYTES = 16 * 1024 * 1024
# Scheduling priority of the jail's processes (nice): the server's own work goes first on a busy CPU.
# Without CAP_SYS_NICE the code cannot lower it again.
SANDBOX_NICE = 10
# CPU seconds past `timeout_seconds` before the kernel's SIGKILL (SIGXCPU comes at the soft limit).
SANDBOX_CPU_GRACE_SECONDS = 1
# Kept of stdout and of stderr each; the rest is read and dropped (`output_truncated`).
SANDBOX_OUTPUT_MAX_BYTES = 1024 * 1024
SANDBOX_OUTPUT_CHUNK_BYTES = 64 * 1024
# Largest program accepted (UTF-8 bytes).
SANDBOX_MAX_CODE_BYTES = 1024 * 1024
# A call of an authored tool: the largest return value (its JSON, UTF-8) carried back, as an
# output stream is, and the room the outcome's envelope adds around it.
SANDBOX_CALL_RESULT_MAX_BYTES = SANDBOX_OUTPUT_MAX_BYTES
SANDBOX_CALL_ENVELOPE_BYTES = 64 * 1024

# -- housekeeping ------------------------------------------------------------------------------
# After the program ended (or was killed), how long its output pipes and the bridge may take to drain.
SANDBOX_DRAIN_SECONDS = 10
# The trial run that decides `PALIMPSEST_SANDBOX=auto`.
SANDBOX_TRIAL_TIMEOUT_SECONDS = 30
# Exit code reported when the server killed the program (wall-clock timeout): -SIGKILL.
SANDBOX_KILLED_EXIT_CODE = -9
