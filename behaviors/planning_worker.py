"""Planning in another process: the planning nodes' ``plan(snapshot)`` (behaviors/background.py) without any solver
holding the tick process's GIL.

On a thread, Drake's and mplib's solvers hold Python's lock in chunks (up to ~0.14 s of mplib), and the tick
thread waits for it: ticks overrun the control period. :class:`PlanningWorker` runs the plans in a child
interpreter instead, which builds and keeps its own tools per robot (behaviors/solver_tools.py: the IK, mplib's
planners and the robot's self filter, cached per process by behaviors/planners.py). Per job the tick process sends
the node's configuration (a copy of its attributes without the tree's and the blackboard's; pickled once per
node) and the node's snapshot (numpy arrays, an Observation: picklable); the worker calls the node class's
``plan`` on them and sends the result back. The tick side keeps the py_trees_ros shape of behaviors/background.py:
a job is sent once, its node RUNNING (holding still) until the result comes, a cancelled job's result dropped.

- One job at a time, in the order sent; a cancelled job not yet started is skipped.
- A worker that dies (a solver's crash, a kill) fails every job it held with :class:`PlanningWorkerDied`
  (the node fails visibly, saying so) and is started again at once, its warm-ups re-sent.
- The child is a fresh interpreter started with ``subprocess`` (as multiprocessing's spawn does; a
  multiprocessing child is not allowed from the evaluation's daemon worker processes), talking over two pipes
  with ``multiprocessing.connection``. It ends when the tick process's end of the pipe closes (at exit, or if
  the tick process dies). Its standard output goes to standard error (``run-ros`` prints JSON on stdout).
- Sending happens on a thread of the tick process (pickling a snapshot of a few MB takes milliseconds, and a
  busy worker may not read at once: the tick never blocks on the pipe); so does receiving.

One worker per tick process and kind of work, kept across episodes as the planner cache is: plans
(:func:`planning_worker`), camera calibration fits (:func:`calibration_worker`) and segmentation
(:func:`segmentation_worker`) each have their own, so that a short plan never waits behind a long fit or a cloud.
"""

from __future__ import annotations

import atexit
import gc
import hashlib
import itertools
import os
import pickle
import queue
import subprocess
import sys
import threading
import time
import traceback
from collections import deque
from multiprocessing.connection import Connection
from typing import Any

from handleit.perception.segmenters import get_segmenter

from .segmentation import segment_cloud
from .solver_tools import make_tools

SEGMENTERS_KEPT = 4  # segmenters a segmentation worker keeps (one per tree solver; older ones are dropped)
WARM_UP_TIMEOUT_S = 600.0  # wall s for a new worker to import the toolkit and build a robot's IK and planners
QUICK_DEATH_S = 30.0  # a worker that dies sooner than this after its start...
MAX_QUICK_DEATHS = 3  # ...this many times in a row is not started again (its jobs fail with the reason)
# Attributes of a node that stay in the tick process: py_trees' own (tree links, status, logger) and the
# blackboard client, the tools (the worker builds its own) and the background job's state.
_TICK_SIDE_ATTRIBUTES = {
    "blackboards", "blackbox_level", "children", "feedback_message", "id", "iterator", "logger", "parent",
    "qualified_name", "status",  # py_trees.behaviour.Behaviour's (2.6); "name" goes, for messages
    "tools", "bb", "_job", "plan_wall_s", "plan_worker_s", "_hold_ticks", "_worker_copy", "_at_cloud", "_settle"}


class PlanningWorkerDied(RuntimeError):
    """The planning worker process ended while it held a job (the job's plan is lost)."""


class PlanningCancelled(RuntimeError):
    """The result of a job the worker skipped because it was cancelled before it started."""


def node_copy(node) -> tuple[bytes, str]:
    """The node's planning configuration, pickled (its class and its attributes but the tick side's), and a
    digest naming it; cached on the node. ``TypeError`` naming the attribute that does not pickle."""
    cached = getattr(node, "_worker_copy", None)
    if cached is not None:
        return cached
    state = {k: v for k, v in vars(node).items() if k not in _TICK_SIDE_ATTRIBUTES}
    try:
        data = pickle.dumps((type(node), state), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as error:  # noqa: BLE001  say which attribute, the pickle error often does not
        bad = []
        for key, value in state.items():
            try:
                pickle.dumps(value)
            except Exception:  # noqa: BLE001
                bad.append(key)
        raise TypeError(f"planning node {node.name!r} ({type(node).__name__}) cannot go to the planning worker "
                        f"process: attributes {bad or '?'} do not pickle ({error}); use a module-level function "
                        f"or functools.partial, or planning='thread'") from error
    node._worker_copy = (data, hashlib.sha1(data).hexdigest())
    return node._worker_copy


class ProcessJob:
    """A plan sent to the worker: ``done()``, ``result()`` (re-raises the plan's exception, or
    :class:`PlanningWorkerDied`), ``cancel()``, ``join()``; as behaviors.background.BackgroundJob."""

    def __init__(self, worker: PlanningWorker, job_id: int, name: str):
        self._worker, self.id, self.name = worker, job_id, name
        self._result: Any = None
        self._error: BaseException | None = None
        self._done = threading.Event()
        self.cancelled = False
        self.started_s = time.perf_counter()
        self.wall_s: float | None = None  # from sending to the result's arrival (set when done)
        self.plan_s: float | None = None  # the plan alone, in the worker

    def done(self) -> bool:
        return self._done.is_set()

    def result(self) -> Any:
        if not self._done.is_set():
            raise RuntimeError("the planning job has not finished")
        if self._error is not None:
            raise self._error
        return self._result

    def cancel(self) -> None:
        """Drop the result; the worker skips the job if it has not started it (a running solver finishes)."""
        self.cancelled = True
        self._worker.cancel(self)

    def join(self, timeout_s: float | None = None) -> bool:
        return self._done.wait(timeout_s)

    def _finish(self, result: Any = None, error: BaseException | None = None, plan_s: float | None = None) -> None:
        if self._done.is_set():
            return
        self._result, self._error, self.plan_s = result, error, plan_s
        self.wall_s = time.perf_counter() - self.started_s
        self._done.set()


class _Connection:
    """One worker process and its two pipes, with a sending and a receiving thread."""

    def __init__(self, on_message, on_exit):
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        code = ("import sys; from handleit.behaviors.planning_worker import _worker_main; "
                "_worker_main(int(sys.argv[1]), int(sys.argv[2]))")
        self.process = subprocess.Popen([sys.executable, "-c", code, str(to_child_r), str(from_child_w)],
                                        pass_fds=(to_child_r, from_child_w), stdin=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self.started_s = time.monotonic()
        self._out = Connection(to_child_w, readable=False)
        self._in = Connection(from_child_r, writable=False)
        self._outbox: queue.Queue = queue.Queue()
        self._on_message, self._on_exit = on_message, on_exit
        self.closing = False
        self._sender = threading.Thread(target=self._send_loop, name="handleit-planning-send", daemon=True)
        self._receiver = threading.Thread(target=self._receive_loop, name="handleit-planning-receive", daemon=True)
        self._sender.start()
        self._receiver.start()

    def send(self, message: tuple, on_error=None) -> None:
        """Queue ``message``; ``on_error(exception)`` if it does not pickle (called on the sending thread)."""
        self._outbox.put((message, on_error))

    def _send_loop(self) -> None:
        while True:
            item = self._outbox.get()
            if item is None:
                break
            message, on_error = item
            try:
                data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as error:  # noqa: BLE001  a snapshot that does not pickle: that job fails
                if on_error is not None:
                    on_error(error)
                continue
            try:
                self._out.send_bytes(data)
            except OSError:  # the worker is gone: the receiving thread reports it
                break
        try:
            self._out.close()
        except OSError:
            pass

    def _receive_loop(self) -> None:
        while True:
            try:
                message = pickle.loads(self._in.recv_bytes())
            except (EOFError, OSError):
                break
            self._on_message(message)
        self._in.close()
        try:
            code = self.process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self._on_exit(self, code)

    def close(self) -> None:
        """Ask the worker to end (it ends when its inbox closes) and wait for it briefly."""
        self.closing = True
        self._outbox.put(None)
        try:
            self.process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            self.process.kill()


class PlanningWorker:
    """The planning worker process of this process (see the module docstring); restarted when it dies."""

    def __init__(self):
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._jobs: dict[int, ProcessJob] = {}
        self._warm_messages: dict[tuple, tuple] = {}  # key -> the warm-up message, re-sent after a restart
        self._warm: dict[tuple, threading.Event] = {}
        self._warm_errors: dict[tuple, str] = {}
        self._segmenters: set = set()  # solver keys whose segmenter the worker has (or is building)
        self.restarts = 0
        self.last_exit: str | None = None
        self._quick_deaths = 0
        self._closed = False
        self._conn = _Connection(self._on_message, self._on_exit)

    @property
    def pid(self) -> int:
        return self._conn.process.pid

    # -- the tick side ------------------------------------------------------------------------------------
    def submit(self, node, snapshot: Any) -> ProcessJob:
        """Send ``type(node).plan(copy of node, snapshot)`` to the worker (``node.tools.spec``: its tools)."""
        spec = node.tools.spec
        if spec is None:
            raise ValueError(f"{node.name}: planning='process' needs Tools.spec (TreeSolver sets it)")
        data, _ = node_copy(node)
        return self._send(node.name, lambda job_id: ("plan", job_id, spec, data, snapshot), "the planning worker",
                          f"{node.name}: its snapshot cannot go to the planning worker")

    def segment(self, key: tuple, spec: tuple, observation) -> ProcessJob:
        """Send ``observation`` to the segmenter ``key`` = (solver's id, reset count): built from ``spec`` = (name,
        target, model, kwargs) on first use, reset when the reset count changes, kept between clouds (trackers
        carry state). The result is :func:`~handleit.behaviors.segmentation.segment_cloud`'s."""
        return self._send(f"segment {spec[0]}", lambda job_id: ("segment", job_id, key, spec, observation),
                          "the segmentation worker", "the cloud cannot go to the segmentation worker")

    def _send(self, name: str, message, worker: str, cannot: str) -> ProcessJob:
        """A new job ``name``, its message (``message(job_id)``) sent; failed at once if the worker is closed,
        failed with ``cannot: <error>`` if the message does not pickle."""
        with self._lock:
            job = ProcessJob(self, next(self._ids), name)
            if self._closed or self._conn is None:
                job._finish(error=PlanningWorkerDied(self.last_exit or f"{worker} is closed"))
                return job
            self._jobs[job.id] = job

            def unpicklable(error: BaseException, job=job) -> None:
                with self._lock:
                    self._jobs.pop(job.id, None)
                job._finish(error=TypeError(f"{cannot}: {error}"))

            self._conn.send(message(job.id), on_error=unpicklable)
        return job

    def prepare_segmenter(self, key: tuple, spec: tuple, timeout_s: float = WARM_UP_TIMEOUT_S) -> None:
        """Build (first time: wait for it, before the clock runs) or reset (do not wait) the segmenter ``key``."""
        solver_key = key[0]
        with self._lock:
            if self._conn is None:
                raise RuntimeError(self.last_exit or "the segmentation worker is closed")
            known = solver_key in self._segmenters
            self._segmenters.add(solver_key)
            event = threading.Event()
            warm_key = ("segmenter", key)
            self._warm[warm_key] = event
            self._conn.send(("segwarm", warm_key, key, spec))
        if known:
            return
        if not event.wait(timeout_s):
            raise TimeoutError(f"the segmentation worker did not build its segmenter within {timeout_s:.0f} s")
        error = self._warm_errors.get(warm_key)
        if error is not None:
            raise RuntimeError(f"the segmentation worker failed to build its segmenter:\n{error}")

    def cancel(self, job: ProcessJob) -> None:
        """The worker skips the job if it has not started it; its result (or the skip) still ends the job, and
        the node that cancelled it no longer reads it."""
        with self._lock:
            if job.id in self._jobs and self._conn is not None:
                self._conn.send(("cancel", job.id))

    def warm_up(self, spec, nodes, timeout_s: float = WARM_UP_TIMEOUT_S) -> None:
        """Build ``spec``'s tools and what ``nodes`` plan with (their ``warm_up`` and ``warm_up_planners``) in
        the worker, and wait for it (once per tools and nodes; a restarted worker is warmed up again, without
        waiting). ``RuntimeError`` with the worker's traceback when that fails, ``TimeoutError`` after
        ``timeout_s``."""
        copies = sorted({node_copy(node) for node in nodes}, key=lambda c: c[1])
        key = (spec.key(), tuple(digest for _, digest in copies))
        with self._lock:
            if self._conn is None:
                raise RuntimeError(self.last_exit or "the planning worker is closed")
            event = self._warm.get(key)
            if event is None:
                event = self._warm[key] = threading.Event()
                message = ("warm", key, spec, [data for data, _ in copies])
                self._warm_messages[key] = message
                if self._conn is not None:
                    self._conn.send(message)
        if not event.wait(timeout_s):
            raise TimeoutError(f"the planning worker did not warm up within {timeout_s:.0f} s")
        error = self._warm_errors.get(key)
        if error is not None:
            raise RuntimeError(f"the planning worker failed to build its planners:\n{error}")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    # -- the receiving thread -----------------------------------------------------------------------------
    def _on_message(self, message: tuple) -> None:
        kind = message[0]
        if kind == "done":
            _, job_id, ok, payload, plan_s = message
            with self._lock:
                job = self._jobs.pop(job_id, None)
            if job is None:
                return
            if ok is None:  # skipped: cancelled before it started
                job._finish(error=PlanningCancelled(f"{job.name}: cancelled before it started"))
            elif ok:
                job._finish(result=payload, plan_s=plan_s)
            else:
                error, text = payload
                error.add_note(f"in the planning worker process:\n{text}")
                job._finish(error=error, plan_s=plan_s)
        elif kind == "warm":
            _, key, ok, text = message
            with self._lock:
                if ok:
                    self._warm_errors.pop(key, None)
                else:
                    self._warm_errors[key] = text
                event = self._warm.get(key)
            if event is not None:
                event.set()
            if key[0] == "segmenter":
                with self._lock:
                    self._warm.pop(key, None)

    def _on_exit(self, conn: _Connection, code: int) -> None:
        """The worker ended: fail its jobs (their plans are lost) and start another, unless closing."""
        why = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        with self._lock:
            if conn is not self._conn:  # closed on purpose, or already replaced
                return
            self.last_exit = f"the planning worker process (pid {conn.process.pid}) ended: {why}"
            jobs, self._jobs = list(self._jobs.values()), {}
            self._segmenters.clear()
            lived_s = time.monotonic() - conn.started_s
            self._quick_deaths = self._quick_deaths + 1 if lived_s < QUICK_DEATH_S else 0
            restart = not self._closed and self._quick_deaths < MAX_QUICK_DEATHS
            self._conn = None
            if restart:
                self._conn = _Connection(self._on_message, self._on_exit)
                self.restarts += 1
                for message in self._warm_messages.values():
                    self._conn.send(message)
            else:
                self.last_exit += f"; not restarted ({self._quick_deaths} deaths within {QUICK_DEATH_S:.0f} s of start)"
                for key, event in self._warm.items():  # nobody waits for warm-ups that will not come
                    if not event.is_set():
                        self._warm_errors[key] = self.last_exit
                        event.set()
        note = "; a new worker was started" if restart else ""
        for job in jobs:
            job._finish(error=PlanningWorkerDied(self.last_exit + note))


_WORKERS: dict[str, PlanningWorker] = {}
_WORKERS_PID = os.getpid()  # a forked copy of this process has none of the workers' threads: it starts its own
_WORKERS_LOCK = threading.Lock()


def _worker(name: str) -> PlanningWorker:
    global _WORKERS_PID
    with _WORKERS_LOCK:
        if _WORKERS_PID != os.getpid():
            _WORKERS.clear()
            _WORKERS_PID = os.getpid()
        if name not in _WORKERS:
            _WORKERS[name] = PlanningWorker()
            atexit.register(_WORKERS[name].close)
        return _WORKERS[name]


def planning_worker() -> PlanningWorker:
    """This process's planning worker, started on first use."""
    return _worker("planning")


def calibration_worker() -> PlanningWorker:
    """This process's camera calibration worker (a process of its own: a fit takes 0.3-2 s, and a grasp plan of
    20 ms queued behind it in the planning worker held the robot still for a second), started on first use."""
    return _worker("calibration")


def segmentation_worker() -> PlanningWorker:
    """This process's segmentation worker (a process of its own: a cloud never waits behind a plan of seconds),
    started on first use."""
    return _worker("segmentation")


# ----------------------------------------------------------------------------------------------------
# The worker process
# ----------------------------------------------------------------------------------------------------
class _WorkerState:
    """The worker's tools per spec and node copies per digest (built once, kept)."""

    def __init__(self):
        self.tools: dict[tuple, Any] = {}
        self.nodes: dict[bytes, Any] = {}
        self.segmenters: dict[Any, list] = {}  # solver key -> [segmenter, reset count], oldest first

    def segmenter(self, key: tuple, spec: tuple):
        solver_key, resets = key
        entry = self.segmenters.pop(solver_key, None)
        if entry is None:
            name, target, model, kwargs = spec
            entry = [get_segmenter(name, target, model, **kwargs), None]
        if entry[1] != resets:
            entry[0].reset()
            entry[1] = resets
        self.segmenters[solver_key] = entry  # the newest last
        while len(self.segmenters) > SEGMENTERS_KEPT:
            self.segmenters.pop(next(iter(self.segmenters)))
        return entry[0]

    def tools_for(self, spec):
        key = spec.key()
        if key not in self.tools:
            self.tools[key] = make_tools(spec, namespace="/handleit_planning_worker")
        return self.tools[key]

    def node(self, spec, data: bytes):
        key = (spec.key(), data)
        if key not in self.nodes:
            cls, state = pickle.loads(data)
            node = cls.__new__(cls)  # not __init__: no tree, no blackboard; plan() reads the snapshot only
            node.__dict__.update(state)
            node.tools, node.bb = self.tools_for(spec), None
            self.nodes[key] = node
        return self.nodes[key]


def _error_payload(error: BaseException) -> tuple[BaseException, str]:
    text = "".join(traceback.format_exception(error, limit=12))
    try:
        pickle.dumps(error)
    except Exception:  # noqa: BLE001
        error = RuntimeError(f"{type(error).__name__}: {error}")
    return error, text


def _freeze_heap() -> None:
    """After a warm-up: what it built (the toolkit, planners, IK, segmenters: hundreds of thousands of objects) goes
    into the garbage collector's permanent generation, so that the collections during plans walk only the plans'
    own objects instead of pausing a plan for ~0.3 s (handleit.harness.gc_pauses measures that pause). What an
    earlier warm-up froze is unfrozen and the whole heap collected first, so that garbage is not kept for the
    worker's life (a worker serves many episodes)."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def _worker_main(fd_in: int, fd_out: int) -> None:
    """The worker's loop: ``plan``, ``cancel`` and ``warm`` messages until the tick process closes the pipe."""
    os.dup2(2, 1)  # print() of a library goes to stderr: the tick process's stdout may carry its results
    if hasattr(os, "sched_setscheduler"):  # a tick process at a real-time priority: planning is not real time
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    inbox, outbox = Connection(fd_in, writable=False), Connection(fd_out, readable=False)
    state = _WorkerState()
    pending: deque = deque()
    cancelled: set[int] = set()

    def receive(block: bool) -> None:
        while block or inbox.poll(0):
            block = False
            message = pickle.loads(inbox.recv_bytes())
            if message[0] == "cancel":
                cancelled.add(message[1])
            else:
                pending.append(message)

    def reply(message: tuple) -> None:
        outbox.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))

    def run_job(job_id: int, work) -> None:
        """Reply ``done`` with ``work()``'s result (or its error) and its time; skipped if cancelled before it
        started."""
        if job_id in cancelled:
            cancelled.discard(job_id)
            reply(("done", job_id, None, None, 0.0))
            return
        start = time.perf_counter()
        try:
            result = work()
            reply(("done", job_id, True, result, time.perf_counter() - start))
        except Exception as error:  # noqa: BLE001  handed to the node's tick, as on a thread
            reply(("done", job_id, False, _error_payload(error), time.perf_counter() - start))

    try:
        while True:
            if not pending:
                receive(block=True)
            receive(block=False)  # the cancels sent meanwhile
            message = pending.popleft()
            if message[0] == "plan":
                _, job_id, spec, data, snapshot = message
                run_job(job_id, lambda: state.node(spec, data).plan(snapshot))
            elif message[0] == "segment":
                _, job_id, key, spec, observation = message
                run_job(job_id, lambda: segment_cloud(state.segmenter(key, spec), observation))
            elif message[0] == "segwarm":
                _, warm_key, key, spec = message
                try:
                    state.segmenter(key, spec)
                    _freeze_heap()
                    reply(("warm", warm_key, True, ""))
                except Exception as error:  # noqa: BLE001
                    reply(("warm", warm_key, False, _error_payload(error)[1]))
            elif message[0] == "warm":
                _, key, spec, datas = message
                try:
                    for data in datas:
                        node = state.node(spec, data)
                        for hook in ("warm_up", "warm_up_planners"):
                            if callable(getattr(node, hook, None)):
                                getattr(node, hook)()
                    _freeze_heap()
                    reply(("warm", key, True, ""))
                except Exception as error:  # noqa: BLE001
                    reply(("warm", key, False, _error_payload(error)[1]))
    except (EOFError, OSError):  # the tick process closed the pipe, or is gone
        pass
