"""Real-time scheduling for a control loop's thread: Linux ``SCHED_FIFO`` at a given priority.

A robot's control loop runs at a real-time priority so that other processes on the same computer cannot
delay its ticks: ros2_control's controller manager asks for ``SCHED_FIFO`` at priority 50 and warns, and goes
on, when it may not. This does the same for the thread that calls it. Without the permission (no root, no
``CAP_SYS_NICE``, no ``rtprio`` limit) or off Linux, the thread keeps its policy and the returned text says
why; nothing else changes. The kernel's real-time throttling (``/proc/sys/kernel/sched_rt_runtime_us``, 95 %
by default) still leaves other processes some CPU should a real-time thread spin.

A real-time thread still shares Python's GIL with the other threads of its process; threads it starts after
the call inherit its policy, so a process that asks before starting its threads (``run-ros``) keeps a thread
that holds the GIL from being preempted by other processes.

Measured on the 2-core development machine (docs/benchmarks.md, "Real-time scheduling"): with the simulated
robot on the same two cores, a tick process at SCHED_FIFO took the CPU that the simulator's rendering needed and
its clock stopped; use it where the robot's drivers do not share the tree's cores, or run at their own priority.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass



@dataclass(frozen=True)
class Scheduling:
    """What a thread runs at: ``policy`` ("SCHED_FIFO" or "SCHED_OTHER"), its priority, and why not real time."""

    policy: str
    priority: int = 0
    reason: str = ""

    def describe(self) -> str:
        if self.policy == "SCHED_FIFO":
            return f"SCHED_FIFO {self.priority}"
        return f"{self.policy}" + (f" ({self.reason})" if self.reason else "")


def current_scheduling() -> Scheduling:
    """The calling thread's scheduling policy and priority."""
    if not hasattr(os, "sched_getscheduler"):
        return Scheduling("default", 0, "no POSIX scheduling on this platform")
    policy = os.sched_getscheduler(0)  # 0: the calling thread (Linux)
    names = {os.SCHED_OTHER: "SCHED_OTHER", os.SCHED_FIFO: "SCHED_FIFO", os.SCHED_RR: "SCHED_RR"}
    return Scheduling(names.get(policy, str(policy)), os.sched_getparam(0).sched_priority)


def request_realtime(priority: int) -> Scheduling:
    """Put the calling thread at ``SCHED_FIFO`` ``priority`` (1-99) if allowed; warn and keep its policy if not.

    Returns what the thread runs at afterwards. Raises ValueError for a priority outside 1-99.
    """
    if isinstance(priority, bool) or not isinstance(priority, int) or not 1 <= priority <= 99:
        raise ValueError(f"real-time priority must be an integer in 1-99 (SCHED_FIFO), got {priority!r}")
    if not hasattr(os, "sched_setscheduler"):
        result = Scheduling("default", 0, "SCHED_FIFO needs Linux")
    else:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
            return current_scheduling()
        except PermissionError as error:
            result = Scheduling(current_scheduling().policy, 0,
                                f"SCHED_FIFO {priority} not permitted ({error.strerror}): needs root, CAP_SYS_NICE "
                                "or an rtprio limit (/etc/security/limits.conf)")
        except OSError as error:
            result = Scheduling(current_scheduling().policy, 0, f"SCHED_FIFO {priority} refused: {error}")
    warnings.warn(f"real-time scheduling not enabled: {result.reason}; ticks may be delayed by other processes",
                  RuntimeWarning, stacklevel=2)
    return result


def restore_normal() -> None:
    """Back to the default time-sharing policy (the end of a real-time run); no-op where not supported."""
    if hasattr(os, "sched_setscheduler"):
        try:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        except OSError:
            pass
