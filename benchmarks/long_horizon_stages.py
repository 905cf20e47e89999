"""Per-stage evaluation of trees composed for goals (issue 19), from ``handleit eval`` records: which skills ran,
where each chain broke, hand-off failures by kind, recoveries, and each predicate perceived at the hand-offs
against the env's ground truth (``diagnostics.handoffs`` and ``diagnostics.handoff_truth``, written by
behaviors/backchaining.py and harness/evaluation.py).

    handleit eval --task TidyIntoDrawer --split test --episodes 5 --workers 1 \\
        --solver 'goal:InsideOf(object, drawer) & Closed(drawer)' --out /tmp/tidy
    python benchmarks/long_horizon_stages.py /tmp/tidy/records.jsonl

Reads records only: runs nothing.
"""

from __future__ import annotations

import argparse

from handleit.harness.records_io import read_record_dicts
from handleit.harness.stages import summarize


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", help="records.jsonl files of handleit eval (or .jsonl.gz)")
    args = parser.parse_args(argv)
    print(summarize(list(read_record_dicts(args.records))))


if __name__ == "__main__":
    main()
