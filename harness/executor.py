"""One episode executor for the harness: ``eval`` and ``compare`` (evaluation), ``demos`` and ``grasp-data`` hand
it their episodes (jobs) and a worker (a picklable callable that keeps its env between jobs), and get each job's
result back in this process, in completion order, exactly once.

Back ends (:func:`make_backend`):

- :class:`InProcess`: ``work(job)`` in this process, one after the other (one worker, nothing to supervise).
- :class:`LocalProcesses`: ``workers`` spawned processes, one ``work`` each. The driver hands each worker one
  job at a time, so it always knows who holds what; a worker that dies (segfault, out of memory) or exceeds
  the job time limit costs that job (retried up to ``max_retries`` times, then reported through ``lost``) and
  is replaced. Workers end when the driver is killed.
- :class:`RayCluster`: one Ray actor per worker (``num_cpus`` each: its CPU budget), each keeping its ``work``;
  jobs go out with ``.remote()``, one per actor at a time, and come back through ``ray.wait`` as they finish.
  Actors are created with ``max_restarts=-1``: Ray restarts a lost one (a crashed worker, a lost node) where it
  finds a free CPU, and the driver gives it jobs again once it answers. The job a lost actor held is
  re-submitted to the live actors (not retried on the lost actor by ``max_task_retries``: after a node loss
  the cluster may have no free CPU to restart it on, and the job would wait for it forever). A hung job is
  ended by ``ray.kill`` (the actor restarts).

Exactly once: the driver keeps the keys of the jobs it has reported and reports each key once; a job whose
result never came (a lost worker) is run again, never reported twice. Whatever the caller records from
``on_result`` (the evaluation's ``records.jsonl``, the demonstrations' HDF5 file) is written by the driver
alone, so a resumed run after the driver itself died reads it as the source of truth.

Ray is an optional, heavy dependency: imported on first use, and a clear :class:`ExecutorError` when it is
missing or the cluster cannot be reached.
"""

from __future__ import annotations

import ipaddress
import multiprocessing as mp
import multiprocessing.connection
import os
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

RAY_REQUIREMENT = "ray[default]==2.60.0"
DEFAULT_CPUS_PER_WORKER = 1.0
RAY_CONNECT_TIMEOUT_S = 5.0  # a TCP connection to the head's GCS port, before ray.init (which waits much longer)
RAY_NO_WORKER_TIMEOUT_S = 600.0  # jobs left and no actor answering for this long: stop (resume later)
RAY_PROBE_EVERY_S = 1.0  # how often a lost actor is asked whether it is back


class ExecutorError(RuntimeError):
    """The back end cannot run: Ray is missing, its cluster is unreachable, or every worker is gone."""


# ----------------------------------------------------------------------------------------------------
# What every back end shares: the jobs still to run, their attempts, and the keys reported
# ----------------------------------------------------------------------------------------------------
class _Ledger:
    """The driver's account of the jobs: to do, attempts per job, reported keys (each reported once)."""

    def __init__(self, jobs: list, key: Callable[[Any], Hashable], on_result: Callable[[Any, Any], None],
                 lost: Callable[[Any, str], Any], max_retries: int, log: Callable[[str], None]):
        self.todo = deque(jobs)  # popleft: the caller's order
        self.key, self.on_result, self.lost, self.max_retries, self.log = key, on_result, lost, max_retries, log
        self.attempts: dict[Hashable, int] = {}
        self.reported: set[Hashable] = set()

    def next(self):
        job = self.todo.popleft()
        k = self.key(job)
        self.attempts[k] = self.attempts.get(k, 0) + 1
        return job

    def finish(self, job, result) -> None:
        k = self.key(job)
        if k in self.reported:  # a second result for one job (it ran twice): keep the first
            return
        self.reported.add(k)
        self.on_result(job, result)

    def fail(self, job, reason: str) -> None:
        """The job's worker was lost: run it again, or report it as lost after ``max_retries`` retries."""
        k = self.key(job)
        if k in self.reported:
            return
        if self.attempts.get(k, 0) <= self.max_retries:
            self.log(f"job {k}: {reason}; running it again")
            self.todo.appendleft(job)
            return
        tries = self.attempts.get(k, 0)
        self.finish(job, self.lost(job, reason if tries <= 1 else f"{reason} ({tries} attempts)"))


@dataclass
class _Run:
    """One call of :meth:`Backend.run`: the work, the jobs and what to do with results."""

    work: Callable[[Any], Any]
    ledger: _Ledger
    job_timeout_s: float | None


class Backend:
    """Where jobs run. ``run`` returns when every job has been reported (``on_result`` or ``lost``)."""

    workers: int = 1

    def run(self, jobs: Iterable, work: Callable[[Any], Any], on_result: Callable[[Any, Any], None], *,
            key: Callable[[Any], Hashable] = lambda job: job, lost: Callable[[Any, str], Any] | None = None,
            job_timeout_s: float | None = None, max_retries: int = 0) -> None:
        """Run ``work(job)`` for every job (``work`` is pickled to each worker once and keeps its state, e.g. an
        env, between jobs); ``on_result(job, result)`` runs in this process, once per key, in completion order.
        A job whose worker died or that exceeded ``job_timeout_s`` seconds is retried (a dead worker only) up
        to ``max_retries`` times, then reported as ``on_result(job, lost(job, reason))``."""
        jobs = list(jobs)
        if not jobs:
            return
        if lost is None:
            def lost(job, reason):
                raise ExecutorError(f"job {key(job)!r} was lost: {reason}")
        self._run(_Run(work, _Ledger(jobs, key, on_result, lost, max_retries, self.log), job_timeout_s))

    @staticmethod
    def log(text: str) -> None:
        """Where the executor says what it does about lost workers (standard error)."""
        print(f"[executor] {text}", file=sys.stderr, flush=True)

    def _run(self, run: _Run) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


class InProcess(Backend):
    """Every job in this process, one after the other (no supervision: a crash ends the run)."""

    def _run(self, run: _Run) -> None:
        ledger = run.ledger
        while ledger.todo:
            job = ledger.next()
            ledger.finish(job, run.work(job))

    def describe(self) -> str:
        return "1 worker (this process)"


# ----------------------------------------------------------------------------------------------------
# Local worker processes
# ----------------------------------------------------------------------------------------------------
def _exit_with_parent(parent: int, poll_s: float = 1.0) -> None:
    """End this worker when the driver that started it (process id ``parent``, passed in by the parent: read
    here, after this process's imports, it would already be init's when the parent died meanwhile) is gone
    (killed: its daemon children are only cleaned up on a normal exit), rather than finish a job nobody will
    record and wait forever."""
    if os.getppid() != parent:
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _local_worker_main(work, inbox, outbox, parent: int) -> None:
    _exit_with_parent(parent)
    while True:
        job = inbox.get()
        if job is None:
            return
        outbox.send(work(job))


class LocalProcesses(Backend):
    """``workers`` supervised processes on this machine (spawned: no inherited Vulkan or PhysX state)."""

    def __init__(self, workers: int = 2):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.workers = workers

    def describe(self) -> str:
        return f"{self.workers} local worker process{'es' if self.workers > 1 else ''}"

    def _run(self, run: _Run) -> None:
        ledger, timeout_s = run.ledger, run.job_timeout_s
        ctx = mp.get_context("spawn")
        # Each worker sends its results on a pipe of its own, synchronously. One queue shared by all workers
        # hung the driver now and then: a queue's writes go through one lock shared by every writer, taken by
        # a background feeder thread, and a worker that dies (a crashing episode) while its feeder holds that
        # lock leaves every other worker blocked on it for ever.
        procs: dict[str, tuple[Any, Any, Any]] = {}  # name -> (process, inbox, result pipe's reading end)

        def start_worker() -> str:
            inbox = ctx.Queue()
            reader, writer = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_local_worker_main, args=(run.work, inbox, writer, os.getpid()), daemon=True)
            proc.start()
            writer.close()  # the worker's end: once the worker is gone, reading gives EOFError
            procs[proc.name] = (proc, inbox, reader)
            return proc.name

        idle = [start_worker() for _ in range(max(1, min(self.workers, len(ledger.todo))))]
        running: dict[str, tuple[Any, float]] = {}  # worker name -> (job, start time)
        try:
            while ledger.todo or running:
                while ledger.todo and idle:
                    name = idle.pop()
                    job = ledger.next()
                    procs[name][1].put(job)
                    running[name] = (job, time.monotonic())
                readers = {reader: name for name, (_, _, reader) in procs.items() if name in running}
                for reader in mp.connection.wait(list(readers), timeout=1.0):
                    name = readers[reader]
                    try:
                        result = reader.recv()
                    except (EOFError, OSError):
                        continue  # the worker died: supervision below
                    job, _ = running.pop(name)
                    idle.append(name)
                    ledger.finish(job, result)
                # Supervision: a dead or hung worker costs its job and is replaced.
                for name, (proc, _, reader) in list(procs.items()):
                    job, started = running.get(name, (None, 0.0))
                    timed_out = job is not None and timeout_s is not None and time.monotonic() - started > timeout_s
                    if proc.is_alive() and not timed_out:
                        continue
                    if timed_out:
                        proc.kill()
                    proc.join(timeout=5)
                    reader.close()
                    del procs[name]
                    if name in idle:
                        idle.remove(name)
                    if job is not None:
                        del running[name]
                        if timed_out:  # a hang is the job's own doing: not retried
                            ledger.finish(job, ledger.lost(job, f"episode exceeded {timeout_s:.0f} s"))
                        else:
                            ledger.fail(job, f"worker process died (exit code {proc.exitcode})")
                    if ledger.todo:
                        idle.append(start_worker())
        finally:
            for proc, inbox, _ in procs.values():
                if proc.is_alive():
                    inbox.put(None)
            for proc, _, reader in procs.values():
                proc.join(timeout=10 if not running else 0.1)
                if proc.is_alive():
                    proc.kill()
                reader.close()


# ----------------------------------------------------------------------------------------------------
# A Ray cluster
# ----------------------------------------------------------------------------------------------------
def import_ray():
    """Ray, or an :class:`ExecutorError` that says how to install it."""
    try:
        import ray  # lazy: ray (an optional cluster back end, ~1 s to import)
    except ImportError as error:
        raise ExecutorError(f"--ray needs Ray, which is not installed ({error}); install it with "
                            f"pip install '{RAY_REQUIREMENT}' (scripts/setup.sh does)") from None
    return ray


def _host_port(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ExecutorError(f"--ray {address!r}: expected 'auto' or HOST:PORT of a Ray cluster's head (its GCS "
                            "port, `ray start --head --port PORT`)")
    return host.strip("[]"), int(port)


def connect_ray(address: str):
    """``ray.init`` to an existing cluster (``"auto"`` or ``HOST:PORT``) unless this process is connected already.
    Returns (ray, True when this call connected). A loopback head (127.x.y.z) makes the driver use that
    address as its own node address, so that nothing here reaches for the machine's network address."""
    ray = import_ray()
    if ray.is_initialized():
        return ray, False
    options: dict[str, Any] = {"log_to_driver": False}
    if address != "auto":
        host, port = _host_port(address)
        try:
            with socket.create_connection((host, port), timeout=RAY_CONNECT_TIMEOUT_S):
                pass
        except OSError as error:
            raise ExecutorError(f"cannot reach a Ray cluster at {address} ({error}); start its head with "
                                f"`ray start --head --port {port}` on {host}, or give another --ray address") from None
        try:
            if ipaddress.ip_address(host).is_loopback:
                options["_node_ip_address"] = host
        except ValueError:  # a host name
            pass
    try:
        ray.init(address=address, **options)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as error:
        raise ExecutorError(f"cannot connect to the Ray cluster at {address!r}: {error}") from None
    return ray, True


class _EpisodeActor:
    """One Ray actor: keeps one ``work`` (and so one env) for its life and runs jobs on it."""

    def __init__(self, work):
        self.work = work

    def ready(self) -> bool:
        return True

    def run(self, job):
        return self.work(job)


class RayCluster(Backend):
    """Actors on a Ray cluster, ``cpus_per_worker`` CPUs each; ``workers`` of them (default: as many as the
    cluster's CPUs hold). ``address``: ``"auto"`` (the cluster this machine belongs to, or ``RAY_ADDRESS``) or
    the head's ``HOST:PORT``."""

    def __init__(self, address: str = "auto", workers: int | None = None,
                 cpus_per_worker: float = DEFAULT_CPUS_PER_WORKER):
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if cpus_per_worker <= 0:
            raise ValueError(f"cpus per worker must be > 0, got {cpus_per_worker}")
        self.address, self.cpus_per_worker = address, cpus_per_worker
        self.ray, self._connected_here = connect_ray(address)
        cpus = self.ray.cluster_resources().get("CPU", 0.0)
        self.nodes = sum(1 for n in self.ray.nodes() if n.get("Alive"))
        self.workers = workers or max(1, int(cpus // cpus_per_worker))

    def describe(self) -> str:
        return (f"{self.workers} Ray actor{'s' if self.workers > 1 else ''} ({self.cpus_per_worker:g} CPU each) "
                f"on {self.nodes} node{'s' if self.nodes > 1 else ''} at {self.address}")

    def close(self) -> None:
        """Disconnect from the cluster if this back end connected (the cluster itself keeps running)."""
        if self._connected_here and self.ray.is_initialized():
            self.ray.shutdown()

    def _run(self, run: _Run) -> None:
        ray, ledger, timeout_s = self.ray, run.ledger, run.job_timeout_s
        RayActorError, RayError, RayTaskError = (ray.exceptions.RayActorError, ray.exceptions.RayError,
                                                  ray.exceptions.RayTaskError)

        actor_class = ray.remote(_EpisodeActor).options(num_cpus=self.cpus_per_worker, max_restarts=-1,
                                                        max_task_retries=0)
        # The work goes with each actor's creation (small: options, no env), so that a restart never depends
        # on an object in the store.
        actors = [actor_class.remote(run.work) for _ in range(min(self.workers, len(ledger.todo)))]
        # An actor gets jobs once it has answered ready(): one that cannot be placed (no free CPU) or is
        # restarting holds none.
        idle: list = []
        in_flight: dict[Any, tuple[Any, Any, float]] = {}  # ref -> (actor, job, submitted)
        probes: dict[Any, Any] = {actor.ready.remote(): actor for actor in actors}  # ref of ready() -> actor
        down: dict[Any, float] = {}  # lost actor -> when it was last asked
        hung: set = set()  # refs whose actor was killed for the time limit
        last_answer = time.monotonic()
        try:
            while ledger.todo or in_flight:
                while ledger.todo and idle:
                    actor = idle.pop()
                    job = ledger.next()
                    in_flight[actor.run.remote(job)] = (actor, job, time.monotonic())
                refs = list(in_flight) + list(probes)
                ready = ray.wait(refs, num_returns=1, timeout=1.0)[0] if refs else []
                if ready and len(refs) > 1:  # and every other one finished meanwhile: one pass for all
                    ready = ray.wait(refs, num_returns=len(refs), timeout=0)[0]
                if not refs:
                    time.sleep(0.2)
                for ref in ready:
                    if ref in probes:
                        actor = probes.pop(ref)
                        try:
                            ray.get(ref)
                            idle.append(actor)
                            last_answer = time.monotonic()
                        except RayError:  # still restarting (or its node has no free CPU yet)
                            down[actor] = time.monotonic()
                        continue
                    actor, job, _ = in_flight.pop(ref)
                    try:
                        result = ray.get(ref)
                    except RayTaskError as error:  # the work raised: the actor is fine, the job is lost
                        idle.append(actor)
                        last_answer = time.monotonic()
                        ledger.fail(job, f"worker raised: {error}")
                        continue
                    except RayActorError as error:
                        down[actor] = 0.0
                        if ref in hung:
                            ledger.finish(job, ledger.lost(job, f"episode exceeded {timeout_s:.0f} s"))
                        else:
                            ledger.fail(job, f"Ray worker lost ({type(error).__name__}: {_first_line(error)})")
                        continue
                    except RayError as error:  # the result itself was lost (its node died after the job)
                        down[actor] = 0.0
                        ledger.fail(job, f"result lost ({type(error).__name__}: {_first_line(error)})")
                        continue
                    idle.append(actor)
                    last_answer = time.monotonic()
                    ledger.finish(job, result)
                now = time.monotonic()
                for actor, asked in list(down.items()):
                    if now - asked >= RAY_PROBE_EVERY_S:
                        del down[actor]
                        probes[actor.ready.remote()] = actor
                if timeout_s is not None:
                    for ref, (actor, job, started) in in_flight.items():
                        if ref not in hung and now - started > timeout_s:
                            hung.add(ref)
                            ray.kill(actor, no_restart=False)  # its ref fails; Ray restarts the actor
                if ledger.todo and not in_flight and not idle and now - last_answer > RAY_NO_WORKER_TIMEOUT_S:
                    raise ExecutorError(f"no Ray worker has answered for {RAY_NO_WORKER_TIMEOUT_S:.0f} s and "
                                        f"{len(ledger.todo)} jobs are left; what finished is recorded (--resume)")
        finally:
            for actor in actors:
                try:
                    ray.kill(actor)
                except RayError:
                    pass


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else ""


def make_backend(workers: int | None = None, ray_address: str | None = None,
                 cpus_per_worker: float = DEFAULT_CPUS_PER_WORKER, in_process_when_one: bool = False) -> Backend:
    """The back end a command's options ask for: a Ray cluster when ``ray_address`` is given, else ``workers``
    local processes (``workers`` None: 2), or this process when ``workers`` is 1 and ``in_process_when_one``."""
    if ray_address:
        return RayCluster(ray_address, workers, cpus_per_worker)
    workers = 2 if workers is None else workers
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if workers == 1 and in_process_when_one:
        return InProcess()
    return LocalProcesses(workers)


def close_backend(backend: Backend) -> None:
    close = getattr(backend, "close", None)
    if close is not None:
        close()


# ----------------------------------------------------------------------------------------------------
# Command-line options, shared by eval, compare, demos and grasp-data
# ----------------------------------------------------------------------------------------------------
def add_executor_arguments(parser, default_workers: int = 1) -> None:
    """``--workers``, ``--ray ADDRESS`` and ``--cpus-per-worker`` on a subcommand's parser."""
    parser.add_argument("--workers", type=int, default=None,
                        help=f"worker processes (default {default_workers}); with --ray, actors (default: as many "
                             "as the cluster's CPUs hold)")
    parser.add_argument("--ray", metavar="ADDRESS", default=None,
                        help="run the episodes on a Ray cluster: 'auto' (the cluster this machine belongs to, or "
                             "RAY_ADDRESS) or the head's HOST:PORT; records are written here, by this process")
    parser.add_argument("--cpus-per-worker", type=float, default=DEFAULT_CPUS_PER_WORKER,
                        help="with --ray: the CPUs each actor holds (its env's budget)")
    parser.set_defaults(default_workers=default_workers)


def backend_of_args(args, in_process_when_one: bool = False) -> Backend:
    """The back end ``add_executor_arguments``'s options ask for (:class:`ExecutorError` for bad ones)."""
    try:
        if args.ray:
            return make_backend(args.workers, args.ray, args.cpus_per_worker)
        workers = args.default_workers if args.workers is None else args.workers
        return make_backend(workers, None, in_process_when_one=in_process_when_one)
    except ValueError as error:
        raise ExecutorError(f"--workers/--cpus-per-worker: {error}") from None
