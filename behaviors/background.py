"""Planning off the tick thread, in the shape of py_trees_ros's action clients.

In real time (``Tools.realtime``) no tick may take longer than the control period, but grasp planning, IK and
mplib take up to seconds. A planning node then sends its work once to a worker thread with a snapshot of what
it reads (the blackboard goes on changing: Perceive keeps merging handle points), reports RUNNING while the
work runs and commands zero velocity meanwhile, saying so in its feedback ("planning in the background:
holding still"), writes the result on the tick the work completes, and cancels the work in ``terminate()``
when it is interrupted. In lockstep (the default) the same three steps run in the tick, so the results and
the episode are what they were.

A node splits its work in three: ``snapshot()`` (tick thread: copy what it reads), ``plan(snapshot)`` (worker:
no blackboard access, returns a result) and ``apply(result) -> Status`` (tick thread: write the blackboard).

Where the worker runs (``Tools.planning``): "process" (the default in real time) sends the snapshot to the
planning worker process (behaviors/planning_worker.py), which builds and keeps its own IK and motion planners
per robot, so that no solver holds this process's GIL; "thread" runs ``plan`` on a thread of this process.
Either way one job runs at a time, and a job cancelled in ``terminate()`` has its result dropped: cancelling
cannot interrupt the C++ solvers (Drake's SNOPT, mplib's OMPL), so abandoned work runs to its end. On a thread,
the jobs take a lock, so that a new plan never shares the IK and the planner (one per robot and process) with an
abandoned one; nodes that use them in the tick thread run only after a planning node has succeeded, that is
after its job ended. Drake and mplib hold Python's GIL in chunks while they solve (measured: up to ~0.14 s of
mplib, a few ms of IK), so on a thread a tick may still wait that long for the GIL; the real-time runner counts
those ticks as overruns. A planning worker process that dies (a solver's crash, a kill) is restarted, and the
node whose plan it held fails visibly, saying so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from py_trees.common import Access, Status

from handleit.types import Observation

from .planning_worker import PlanningWorkerDied, planning_worker

HOLD_STILL_FEEDBACK = "planning in the background: holding still"
# A node whose plan only improves on one the robot already follows (``holds_still = False``) says this instead.
FOLLOWING_FEEDBACK = "planning in the background: the robot follows the plan it has"
SETTLE_FEEDBACK = "waiting for a cloud taken at rest: holding still"
# A node that compares the robot as the cameras see it with its model (the hand-eye corrections) must put the model
# at the joints of the moment the cloud was taken: in real time the newest cloud is older than the newest joint
# states (a camera at 10-30 Hz, sensor latency), and a base still moving at 1 m/s moves the hand 7 cm in a 15 Hz
# camera's period; that was read as a 74 mm camera error and the grasp moved by it (the drawer through ROS, "grasp
# holds?"). Where the cloud carries its stamp (Observation.points_time_s) and the tree's state history reaches it,
# the node plans at once on the robot's state at that stamp (behaviors/state_history.py). Otherwise it waits for a
# cloud taken after the robot came to rest: no joint faster than REST_QVEL; then SETTLE_CLOUDS new clouds; at most
# SETTLE_MAX_S of waiting, after which the node plans on what it has.
REST_QVEL = 0.01  # m/s or rad/s
SETTLE_CLOUDS = 2
SETTLE_MAX_S = 1.0
# One background plan at a time per process: the IK and the motion planner are shared (tree_solver's cache).
_PLANNING_LOCK = threading.Lock()


class BackgroundJob:
    """``work(snapshot)`` on a daemon thread; ``done()``, ``result()`` (re-raises its exception), ``cancel()``."""

    def __init__(self, work: Callable[[Any], Any], snapshot: Any, name: str = "plan"):
        self._result: Any = None
        self._error: BaseException | None = None
        self._done = threading.Event()
        self.cancelled = False
        self.started_s = time.perf_counter()
        self.wall_s: float | None = None  # how long the work took (set when done)

        def run() -> None:
            with _PLANNING_LOCK:
                if self.cancelled:
                    self._done.set()
                    return
                try:
                    self._result = work(snapshot)
                except BaseException as error:  # noqa: BLE001  handed to the tick thread by result()
                    self._error = error
                finally:
                    self.wall_s = time.perf_counter() - self.started_s
                    self._done.set()

        self._thread = threading.Thread(target=run, name=f"handleit-{name}", daemon=True)
        self._thread.start()

    def done(self) -> bool:
        return self._done.is_set()

    def result(self) -> Any:
        if not self._done.is_set():
            raise RuntimeError("the background job has not finished")
        if self._error is not None:
            raise self._error
        return self._result

    def cancel(self) -> None:
        """Drop the result; work not yet started does not start (running C++ solvers finish on their own)."""
        self.cancelled = True

    def join(self, timeout_s: float | None = None) -> bool:
        self._thread.join(timeout_s)
        return self._done.is_set()


class BackgroundPlanning:
    """Mixin for a :class:`~behaviors.common.Skill` that plans: subclasses define ``snapshot()``, ``plan()``
    and ``apply()`` (module docstring) and put this class first among their bases."""

    _job: BackgroundJob | None = None
    plan_wall_s: list[float]  # wall seconds of each completed background plan (diagnostics)
    plan_worker_s: list[float | None]  # of those, the seconds the planning worker spent on the plan itself
    # Real time only: plan on a cloud taken after the robot came to rest (see SETTLE_FEEDBACK's comment).
    needs_cloud_at_rest: bool = False
    # Real time: command zero velocity while the plan runs. False for a node that only searches for a better plan
    # than one the robot already follows (beside the move that follows it, in a Parallel): it commands nothing.
    holds_still: bool = True
    _settle: dict | None = None
    _at_cloud = None  # real time, needs_cloud_at_rest: the observation at its cloud's stamp, for snapshot()

    def observation_for_plan(self) -> Observation:
        """The observation a plan reads: for ``needs_cloud_at_rest`` nodes in real time, the robot's state at the
        cloud's stamp where it is known (see SETTLE_FEEDBACK's comment); else the blackboard's."""
        return self._at_cloud if self._at_cloud is not None else self.bb.observation

    def _settled(self) -> bool:
        """Real time, ``needs_cloud_at_rest``: hold still until the robot is at rest and SETTLE_CLOUDS new
        clouds have come since (True), or SETTLE_MAX_S have passed (True, said in the feedback)."""
        obs = self.bb.observation
        if self._settle is None:
            self._settle = {"start_s": time.perf_counter(), "points": obs.points, "clouds": 0, "at_rest": False}
        st = self._settle
        if not st["at_rest"]:
            st["at_rest"] = bool(np.all(np.abs(np.asarray(obs.qvel, dtype=float)) <= REST_QVEL))
            st["points"] = obs.points
        elif obs.points is not st["points"]:
            st["clouds"], st["points"] = st["clouds"] + 1, obs.points
        waited_s = time.perf_counter() - st["start_s"]
        if st["clouds"] >= SETTLE_CLOUDS or waited_s > SETTLE_MAX_S:
            self._settle = None
            return True
        if self.holds_still:
            self.send(np.zeros(len(self.tools.model.joint_names)), "hold")
        self.feedback_message = f"{SETTLE_FEEDBACK} ({'at rest' if st['at_rest'] else 'moving'}, {st['clouds']} clouds)"
        return False

    def update(self) -> Status:
        if not hasattr(self, "plan_wall_s"):
            self.plan_wall_s = []
        if not getattr(self.tools, "realtime", False):  # lockstep: in the tick, as before
            start = time.perf_counter()
            result = self.plan(self.snapshot())
            self.plan_wall_s.append(time.perf_counter() - start)
            return self.apply(result)
        if self._job is None:
            # The node commands while it plans (hold still): write access to the command, real time only.
            if self.holds_still:
                self.bb.register_key("command", access=Access.WRITE)
            if self.needs_cloud_at_rest:
                self._at_cloud = self.observation_at_cloud()
                if self._at_cloud is None and not self._settled():
                    return Status.RUNNING
            if getattr(self.tools, "planning", "thread") == "process":
                self._job = planning_worker().submit(self, self.snapshot())
            else:
                self._job = BackgroundJob(self.plan, self.snapshot(), name=self.name)
            self._hold_ticks, self._at_cloud = 0, None
        if not self._job.done():
            self._hold_ticks += 1
            if self.holds_still:
                self.send(np.zeros(len(self.tools.model.joint_names)), "hold")
            self.feedback_message = (f"{HOLD_STILL_FEEDBACK if self.holds_still else FOLLOWING_FEEDBACK} "
                                     f"({self._hold_ticks} ticks, {time.perf_counter() - self._job.started_s:.2f} s)")
            return Status.RUNNING
        job, self._job = self._job, None
        self.plan_wall_s.append(job.wall_s)
        # The plan's own seconds in the worker process (None on a thread): wall_s less this is the queue and
        # the pipes.
        self.plan_worker_s = [*getattr(self, "plan_worker_s", []), getattr(job, "plan_s", None)]
        try:
            result = job.result()
        except PlanningWorkerDied as died:  # the plan is lost; the worker was restarted for the next one
            return self.fail(f"planning worker died while planning: {died}")
        return self.apply(result)

    def warm_up_planners(self) -> None:
        """Build the planners ``plan`` uses (real time only, before the clock runs: in this process with
        ``planning="thread"``, in the worker with "process"). The IK is built with the tools; nodes that plan
        with a motion planner build it here."""

    def planning(self) -> bool:
        """A background plan is running (the node holds the robot still)."""
        return self._job is not None

    def terminate(self, new_status: Status) -> None:
        if self._job is not None:  # interrupted (or stopped) while the plan runs: cancel it
            self._job.cancel()
            self._job = None
        self._settle = None
        super().terminate(new_status)
