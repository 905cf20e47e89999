"""The robustness table (perturbed against unperturbed, same seeds) from the records of a run, finished or not.

``handleit eval --perturb ...`` writes OUT/robustness.md when the run ends; a long run that is stopped and resumed
over several sessions (``--resume``) has its records only. This prints the same table from them
(``handleit.harness.evaluation.robustness_table``: only seeds run both ways count), per split with ``--by-split``.

    python benchmarks/robustness_table.py OUT/records.jsonl [--by-split]
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from handleit.harness.evaluation import read_records_file, robustness_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", type=Path)
    parser.add_argument("--by-split", action="store_true", help="one row per split (the task named task/split)")
    args = parser.parse_args()
    records = list(read_records_file(args.records).values())
    if not records:
        raise SystemExit(f"{args.records}: no records")
    if args.by_split:
        records = [dataclasses.replace(r, task=f"{r.task}/{r.split}") for r in records]
    print(robustness_table(records))


if __name__ == "__main__":
    main()
