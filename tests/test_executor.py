"""The episode executor's bookkeeping, without envs: each job reported once, a lost worker's job run again
(up to max_retries) and then reported lost, on this process and on local worker processes. (The Ray back end
on a real cluster: tests/test_ray_executor.py.)"""

from __future__ import annotations

import os

import pytest

from handleit.harness.executor import ExecutorError, InProcess, LocalProcesses, _Ledger, make_backend


class Square:
    """A job's work: its square; job 3 kills its worker process (as a segfault would) on its first try only."""

    def __init__(self, marker_dir: str = ""):
        self.marker_dir = marker_dir
        self.done_here = 0  # kept between jobs: a worker keeps its state

    def __call__(self, job: int) -> tuple[int, int]:
        marker = os.path.join(self.marker_dir, f"{job}.tried")
        if job == 3 and self.marker_dir and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(7)
        if job == 5 and self.marker_dir:
            os._exit(9)  # every try
        self.done_here += 1
        return job * job, self.done_here


def test_the_ledger_reports_each_key_once_and_gives_up_after_the_retries():
    reported, logged = [], []
    ledger = _Ledger([1, 2], key=lambda j: j, on_result=lambda j, r: reported.append((j, r)),
                     lost=lambda j, reason: f"lost: {reason}", max_retries=1, log=logged.append)
    job = ledger.next()
    ledger.finish(job, "a")
    ledger.finish(job, "again")  # a second result for one job is dropped
    job = ledger.next()
    ledger.fail(job, "worker died")  # first loss: run again
    assert list(ledger.todo) == [2] and "running it again" in logged[0]
    ledger.fail(ledger.next(), "worker died")  # second loss: reported
    assert reported == [(1, "a"), (2, "lost: worker died (2 attempts)")]


def test_in_process_keeps_one_worker_state_and_reports_in_order():
    results = []
    InProcess().run([1, 2, 3], Square(), lambda job, r: results.append((job, r)))
    assert results == [(1, (1, 1)), (2, (4, 2)), (3, (9, 3))]  # one Square kept its count across the jobs


def test_local_processes_rerun_a_crashed_job_and_report_a_crashing_one_lost(tmp_path):
    results = {}
    backend = LocalProcesses(2)
    backend.run(range(7), Square(str(tmp_path)), lambda job, r: results.setdefault(job, []).append(r),
                lost=lambda job, reason: reason, max_retries=2)
    assert sorted(results) == list(range(7)) and all(len(v) == 1 for v in results.values())  # each once
    assert results[3][0][0] == 9  # died once, then ran on a new worker
    assert results[5] == ["worker process died (exit code 9) (3 attempts)"]
    assert all(results[j][0][0] == j * j for j in (0, 1, 2, 4, 6))


def test_bad_worker_counts_are_refused():
    with pytest.raises(ValueError, match="workers must be >= 1"):
        make_backend(0)
    with pytest.raises(ValueError, match="workers must be >= 1"):
        LocalProcesses(0)
    assert isinstance(make_backend(1, in_process_when_one=True), InProcess)
    with pytest.raises(ExecutorError, match="was lost"):  # no ``lost``: a lost job is an error
        LocalProcesses(1).run([5], Square("/nonexistent-dir-for-markers"), lambda job, r: None)
