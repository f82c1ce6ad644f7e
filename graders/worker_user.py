"""The grading worker as an unprivileged user of its own: the Gradescope autograder's fallback
where bubblewrap cannot start (instructor/gradescope_run.py).

With ``COURSE_WORKER_USER=NAME`` in the environment of a checker that runs as root,
graders.client starts the worker through :func:`user_prefix`: the worker's empty working
directory is given to that user, then ``setpriv`` switches to it with no supplementary groups,
no capabilities and no_new_privs, and the worker sets its own limits as any non-root worker
does (RLIMIT_NPROC included). The worker then reads only what that user may: whoever sets this
up makes the hidden graders, the secret half and the seed unreadable to it, as the Gradescope
runner does and checks before it grades. Unlike the sandbox, the user sees whatever any user of
the machine sees, the network included.
"""

from __future__ import annotations

import os
import shlex
import shutil

WORKER_USER_VARIABLE = "COURSE_WORKER_USER"
SYSTEM_TOOLS = "/usr/bin:/bin:/usr/sbin:/sbin"  # never the PATH's: they run as root


class WorkerUserError(RuntimeError):
    """The worker cannot be started as the user asked for."""


def user_prefix(name: str | None = None) -> list[str]:
    """The command prefix that runs the worker as user ``name`` (default: $COURSE_WORKER_USER);
    empty when no user is asked for."""
    name = os.environ.get(WORKER_USER_VARIABLE, "") if name is None else name
    if not name:
        return []
    import pwd  # Unix only, as the worker is

    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise WorkerUserError(
            f"{WORKER_USER_VARIABLE}={name}: no such user (create it with useradd)"
        ) from None
    if entry.pw_uid == 0:
        raise WorkerUserError(f"{WORKER_USER_VARIABLE}={name} is root: name an unprivileged user")
    if os.geteuid() != 0:
        raise WorkerUserError(f"{WORKER_USER_VARIABLE}={name} needs the checker to run as root")
    tools = {tool: shutil.which(tool, path=SYSTEM_TOOLS) for tool in ("sh", "chown", "setpriv")}
    missing = [tool for tool, path in tools.items() if not path]
    if missing:
        raise WorkerUserError(
            f"{WORKER_USER_VARIABLE} needs {', '.join(missing)}: apt-get install util-linux"
        )
    uid, gid = entry.pw_uid, entry.pw_gid
    give = f'{shlex.quote(str(tools["chown"]))} {uid}:{gid} . && exec "$0" "$@"'
    return [
        str(tools["sh"]),
        "-c",
        give,
        str(tools["setpriv"]),
        f"--reuid={uid}",
        f"--regid={gid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]
