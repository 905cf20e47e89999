"""Records files of ``handleit eval`` read as written and as docs/records keeps them (harness/records_io.py)."""

from __future__ import annotations

import gzip
import json

import pytest

from handleit.harness.records_io import read_record_dicts


def test_plain_and_gzipped_records_read_alike_in_order(tmp_path):
    rows = [{"index": i, "success": i % 2 == 0} for i in range(3)]
    text = "\n".join(json.dumps(r) for r in rows[:2]) + "\n\n" + json.dumps(rows[2]) + "\n"  # a blank line
    plain = tmp_path / "records.jsonl"
    plain.write_text(text)
    packed = tmp_path / "records.jsonl.gz"
    with gzip.open(packed, "wt") as f:
        f.write(text)
    assert list(read_record_dicts([plain])) == rows
    assert list(read_record_dicts([packed, str(plain)])) == rows + rows
    with pytest.raises(FileNotFoundError, match="no records file .*missing.jsonl"):
        list(read_record_dicts([tmp_path / "missing.jsonl"]))
