"""single_blas_thread: BLAS at one thread in this process and in the processes it starts; the user's setting kept."""

import os
import subprocess
import sys

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from handleit.blas_threads import single_blas_thread


@pytest.fixture
def restore_blas(monkeypatch):
    for name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    with threadpool_limits(limits=None):  # whatever the test sets is undone at its end
        yield


def blas_threads() -> set[int]:
    return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}


def test_one_thread_here_and_in_the_processes_started_after(restore_blas):
    assert single_blas_thread() == 1
    assert blas_threads() == {1}
    child = subprocess.run([sys.executable, "-c", "import numpy, threadpoolctl; print({p['num_threads'] for p in "
                            "threadpoolctl.threadpool_info() if p['user_api'] == 'blas'})"],
                           capture_output=True, text=True, check=True)
    assert child.stdout.strip() == "{1}"


def test_the_users_setting_is_kept_and_a_bad_one_named(restore_blas, monkeypatch):
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    assert single_blas_thread() == 2 and os.environ["OPENBLAS_NUM_THREADS"] == "2"
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "many")
    with pytest.raises(ValueError, match="OPENBLAS_NUM_THREADS must be a whole number of threads, got 'many'"):
        single_blas_thread()
