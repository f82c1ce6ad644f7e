"""The one table of the limits on the student's processes (standard library only).

The worker applies them to itself and every process it forks (``hardening.harden``, from its
command line, whose defaults are these); the sandbox applies them, hard, to everything it runs
(graders/sandbox.py); the checker names them in its hints (graders/client.py).
"""

MEMORY = 4 << 30  # bytes of address space of each process (RLIMIT_AS)
CPU_SECONDS = 3600  # RLIMIT_CPU of each process: a backstop, the checker times every call
FILE_SIZE = 64 << 20  # bytes: no file written may grow beyond this (RLIMIT_FSIZE)
OPEN_FILES = 256  # RLIMIT_NOFILE in the sandbox
SCRATCH = 256 << 20  # bytes of the sandbox's private /tmp (a tmpfs: counts as memory)
# RLIMIT_NPROC counts every process and thread of a user. In the sandbox the student's code
# runs as a user of its own; without one, as the checker's user, whose other processes count.
SANDBOX_PROCESSES = 64
USER_PROCESSES = 1024
# Nodes of the operator graph a by-hand function's call may trace to (graders/worker/tracing.py;
# the checker refuses a longer one unread, graders/graph.py).
GRAPH_NODES = 20_000
