"""The segmenters against the simulator's masks, read off evaluation records (issue "Real robots, part 1").

For each task, split and horizon: the success of each segmenter beside the ``simulator`` segmenter's on the
same seeds (only seeds both ran count), the difference, whether it is within the target (0.05 below the
simulator's at most), and the tree nodes that failed. Produce the records with, e.g.::

    .venv/bin/handleit eval --task all --split train,test --episodes 50 --max-steps 200 \\
        --segmenter simulator,geometric,color_marker --out outputs/segmenters-200

then::

    .venv/bin/python benchmarks/segmenter_table.py outputs/segmenters-200/records.jsonl [more records ...]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path

TARGET_GAP = 0.05  # the target: success within 0.05 of the simulator segmenter's


def load(paths: list[Path]) -> list[dict]:
    records = []
    for path in paths:
        for line in Path(path).read_text().splitlines():
            if line.strip():
                records.append(json.loads(line))
    return records


def table(records: list[dict]) -> str:
    runs: dict[tuple, dict[str, dict[tuple, dict]]] = defaultdict(lambda: defaultdict(dict))
    for r in records:
        if r.get("perturb"):
            continue
        runs[(r["task"], r["split"], r["max_steps"], r["solver"])][r.get("segmenter", "simulator")][
            (r["seed"], r["model_id"])] = r
    lines = ["| task | split | steps | segmenter | episodes | simulator | segmenter | difference | within 0.05 | "
             "failed nodes (segmenter) | errors |",
             "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | --- | --- | ---: |"]
    for (task, split, steps, solver), by_segmenter in sorted(runs.items()):
        reference = by_segmenter.get("simulator", {})
        for name, recs in sorted(by_segmenter.items()):
            if name == "simulator":
                continue
            shared = sorted(set(reference) & set(recs))
            if not shared:
                continue
            n = len(shared)
            sim = sum(reference[k]["success"] for k in shared) / n
            seg = sum(recs[k]["success"] for k in shared) / n
            nodes = Counter(recs[k]["failed_node"] for k in shared if not recs[k]["success"])
            errors = sum(recs[k].get("error") is not None for k in shared)
            verdict = "yes" if seg >= sim - TARGET_GAP else f"no ({sim - seg:.2f} short)"
            failed = ", ".join(f"{node} {count}" for node, count in nodes.most_common())
            lines.append(f"| {task} | {split} | {steps} | {name} | {n} | {sim:.2f} | {seg:.2f} | {seg - sim:+.2f} | "
                         f"{verdict} | {failed} | {errors} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", nargs="+", type=Path, help="records.jsonl files of handleit eval")
    args = parser.parse_args()
    print(table(load(args.records)))


if __name__ == "__main__":
    main()
