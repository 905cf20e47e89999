"""One BLAS thread per process, for the toolkit's commands and every process they start.

The toolkit's linear algebra is small (4 x 4 poses, 3 x 3 covariances, [N, 3] clouds), and its commands already
run in parallel by process (evaluation workers, the planning and segmentation workers, the simulated robot).
OpenBLAS's own threads then only wait on each other and on the other processes: on the 2-core development
machine, busy with other work, ``np.linalg.inv`` of a 4 x 4 pose took 6-10 ms with numpy's default threads and
4 microseconds with one (a control tick inverted a pose every tick). Ray starts its workers with one thread for
the same reason. A value the user has set in ``OPENBLAS_NUM_THREADS`` is kept.
"""

from __future__ import annotations

import os

from threadpoolctl import threadpool_limits

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def single_blas_thread() -> int:
    """Limit BLAS to one thread in this process (or the user's ``OPENBLAS_NUM_THREADS``), and set the variables
    so that the processes it starts begin that way; returns the limit."""
    for name in BLAS_THREAD_VARIABLES:
        if not os.environ.get(name, "").strip():  # unset or empty: OpenBLAS's own default, which this replaces
            os.environ[name] = "1"
    try:
        limit = int(os.environ["OPENBLAS_NUM_THREADS"])
    except ValueError as error:
        raise ValueError(f"OPENBLAS_NUM_THREADS must be a whole number of threads, got "
                         f"{os.environ['OPENBLAS_NUM_THREADS']!r}") from error
    if limit < 1:
        raise ValueError(f"OPENBLAS_NUM_THREADS must be at least 1, got {limit}")
    threadpool_limits(limits=limit, user_api="blas")
    return limit
