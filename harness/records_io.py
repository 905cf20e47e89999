"""Reading the records files of ``handleit eval`` (one JSON object per line): ``records.jsonl`` as an evaluation
writes it, or gzipped (``.jsonl.gz``) as docs/records keeps them. Plain Python; imports no simulator, so that the
benchmarks that only read records stay light."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Iterator
from pathlib import Path


def read_record_dicts(paths: Iterable[str | Path]) -> Iterator[dict]:
    """Each record of each file in ``paths``, in order, as a dict; blank lines skipped. A path ending in ``.gz``
    is read through gzip. FileNotFoundError names a missing file."""
    for path in paths:
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"no records file {path}")
        with (gzip.open(path, "rt") if path.suffix == ".gz" else path.open()) as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)
