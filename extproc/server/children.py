"""Child processes that end when the process that started them ends, however it ends.

A supervisor (`extproc stack`, `extproc serve --workers N`) stops its children in order when it
is asked to (SIGTERM, SIGINT). But a supervisor killed outright (SIGKILL, the OOM killer, a crash)
runs no handler, and its children, in sessions of their own so that a terminal's Ctrl-C reaches
only the supervisor, would keep running and holding their ports. So each child asks the kernel
(Linux `prctl(PR_SET_PDEATHSIG)`) for a signal when its parent goes: the signal survives `exec`,
so it serves Envoy as well as our own Python children.

The kernel's "parent" is the thread that forked the child: a child started from a thread that
later exits would be signalled then. `die_with_parent` therefore arms the signal only for children
started from the main thread, which lives as long as the process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        prctl: Callable[..., int] = libc.prctl
    except (OSError, AttributeError):
        return None
    return prctl


# Looked up once, in the parent: the child, between fork and exec, should do as little as it can.
_PRCTL = _load_prctl()


def parent_death_signal_supported() -> bool:
    return _PRCTL is not None


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A `preexec_fn` for `subprocess.Popen` that has the child sent `sig` when this process ends.

    None where it cannot hold (not Linux, or called off the main thread; see the module's note):
    the caller's orderly stop is then the only one.
    """
    if _PRCTL is None or threading.current_thread() is not threading.main_thread():
        return None
    prctl = _PRCTL
    parent = os.getpid()

    def arm() -> None:  # runs in the child, after fork, before exec
        prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was armed: act as if it came
            os.kill(os.getpid(), sig)

    return arm
