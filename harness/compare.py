"""The comparison table: train and test success per task and solver (trees, BC, TD3+BC), as in Table 1 of "Let's
Handle It" (arXiv 2202.11792).

Every number comes from the evaluation harness's per-episode records (``handleit.harness.evaluation``): the
comparison runs each solver on each task and split through :func:`~handleit.harness.evaluation.run_episodes` into
one ``records.jsonl`` (resumable: a rerun only plays the episodes not yet recorded) and may also take the
records of earlier evaluations (``extra_records``) for the episodes they hold, matched by the harness's
episode key (task, split, solver, max steps, seed, object).

Solver names as ``handleit eval`` takes them; ``{task}`` in a name is replaced by each task's name, so that
one name covers a checkpoint per task: ``bc:outputs/baselines/{task}-bc.pt``. Outputs: ``comparison.md``
(markdown table), ``comparison.csv`` (one row per task, solver and split) and ``comparison.png`` (bars).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from handleit.harness.evaluation import EpisodeRecord, EpisodeSpec, episode_specs, run_episodes
from handleit.harness.executor import Backend
from handleit.harness.records_io import read_record_dicts

SPLITS = ("train", "test")
CSV_FIELDS = ("task", "solver", "solver_spec", "split", "max_steps", "episodes", "successes", "success_rate",
              "errors")


def solver_for_task(solver: str, task: str) -> str:
    return solver.replace("{task}", task)


def solver_label(solver: str) -> str:
    """A column name: the algorithm of a checkpoint solver (``bc:path`` -> ``bc``), else the solver's name."""
    prefix, _, _ = solver.partition(":")
    return prefix if prefix in ("bc", "td3bc", "policy") else solver


@dataclass(frozen=True)
class Cell:
    task: str
    solver: str  # the label (column)
    solver_spec: str  # the solver name as run for this task
    template: str  # the solver name as given ({task} not replaced)
    split: str
    max_steps: int
    episodes: int
    successes: int
    errors: int

    @property
    def rate(self) -> float | None:
        return self.successes / self.episodes if self.episodes else None


def comparison_specs(tasks: Iterable[str], solvers: Iterable[str], splits: Iterable[str], episodes: int,
                     max_steps: int, seed: int = 0) -> list[EpisodeSpec]:
    specs = []
    for task in tasks:
        for solver in solvers:
            for split in splits:
                specs += episode_specs(task, split, episodes, solver_for_task(solver, task), max_steps, seed)
    return specs


def read_records(paths: Iterable[str | Path]) -> list[EpisodeRecord]:
    """Records of earlier evaluations (``records.jsonl`` files of ``handleit eval``, or gzipped)."""
    return [EpisodeRecord(**d) for d in read_record_dicts(paths)]


def run_comparison(tasks: list[str], solvers: list[str], splits: list[str], episodes: int, max_steps: int,
                   out: str | Path, seed: int = 0, workers: int = 1, extra_records: Iterable[str | Path] = (),
                   episode_timeout_s: float = 600.0, progress: bool = True,
                   backend: Backend | None = None) -> list[Cell]:
    """Run what is missing (on ``backend``, default ``workers`` local processes) and return the table's cells;
    writes the records and the three outputs in ``out``."""
    out = Path(out)
    specs = comparison_specs(tasks, solvers, splits, episodes, max_steps, seed)
    wanted = {s.key for s in specs}
    earlier = {r.key: r for r in read_records(extra_records) if r.key in wanted}
    to_run = [s for s in specs if s.key not in earlier]
    records = list(earlier.values())
    if to_run:
        records += run_episodes(to_run, out / "records.jsonl", workers=workers, resume=True,
                                episode_timeout_s=episode_timeout_s, progress=progress, backend=backend)
    cells = table_cells(records, tasks, solvers, splits, max_steps)
    write_outputs(cells, out)
    return cells


def table_cells(records: list[EpisodeRecord], tasks: list[str], solvers: list[str], splits: list[str],
                max_steps: int) -> list[Cell]:
    """One cell per (task, solver, split), from the records of that solver's name for the task."""
    labels = [solver_label(s) for s in solvers]
    if len(set(labels)) != len(labels):  # two checkpoints of one algorithm: name the columns in full
        labels = list(solvers)
    cells = []
    for task in tasks:
        for solver, label in zip(solvers, labels):
            name = solver_for_task(solver, task)
            for split in splits:
                rs = [r for r in records
                      if (r.task, r.solver, r.split, r.max_steps) == (task, name, split, max_steps)]
                cells.append(Cell(task, label, name, solver, split, max_steps, len(rs), sum(r.success for r in rs),
                                  sum(r.error is not None for r in rs)))
    return cells


def markdown_table(cells: list[Cell]) -> str:
    """Rows: tasks; columns: each solver's train and test success, ``rate (successes/episodes)``."""
    solvers = list(dict.fromkeys(c.solver for c in cells))
    splits = [s for s in SPLITS if any(c.split == s for c in cells)] or sorted({c.split for c in cells})
    tasks = list(dict.fromkeys(c.task for c in cells))
    index = {(c.task, c.solver, c.split): c for c in cells}
    header = "| task | " + " | ".join(f"{s} {split}" for s in solvers for split in splits) + " |"
    lines = [header, "| --- |" + " ---: |" * (len(solvers) * len(splits))]
    for task in tasks:
        row = []
        for solver in solvers:
            for split in splits:
                c = index.get((task, solver, split))
                if c is None or not c.episodes:
                    row.append("-")
                else:
                    errors = f" [{c.errors} errors]" if c.errors else ""
                    row.append(f"{c.rate:.3f} ({c.successes}/{c.episodes}){errors}")
        lines.append(f"| {task} | " + " | ".join(row) + " |")
    steps = sorted({c.max_steps for c in cells})
    specs = sorted({f"{c.solver} = `{c.template}`" for c in cells if c.template != c.solver})
    lines += ["", (f"Success rate (successes / episodes) in {', '.join(map(str, steps))}-step episodes; "
              "episodes that raised or crashed count as failures (errors in brackets).")]
    if specs:
        lines.append("Solvers: " + "; ".join(specs) + ".")
    return "\n".join(lines)


def write_csv(cells: list[Cell], path: Path) -> Path:
    with Path(path).open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for c in cells:
            writer.writerow({"task": c.task, "solver": c.solver, "solver_spec": c.solver_spec, "split": c.split,
                             "max_steps": c.max_steps, "episodes": c.episodes, "successes": c.successes,
                             "success_rate": "" if c.rate is None else f"{c.rate:.4f}", "errors": c.errors})
    return Path(path)


def bar_chart(cells: list[Cell], path: Path, title: str = "Success rate per task and split") -> Path:
    """Grouped bars: one group per (task, split), one bar per solver; empty cells are left out."""
    import matplotlib  # lazy: matplotlib, for this chart only

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: matplotlib

    solvers = list(dict.fromkeys(c.solver for c in cells))
    groups = list(dict.fromkeys((c.task, c.split) for c in cells))
    index = {(c.task, c.split, c.solver): c for c in cells}
    width = 0.8 / max(len(solvers), 1)
    x = np.arange(len(groups))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(groups) * max(1, len(solvers)) / 2 + 2), 4.0))
    for k, solver in enumerate(solvers):
        rates = [index.get((t, s, solver)) for t, s in groups]
        heights = [c.rate if c is not None and c.rate is not None else np.nan for c in rates]
        bars = ax.bar(x + (k - (len(solvers) - 1) / 2) * width, heights, width, label=solver)
        for bar, h in zip(bars, heights):
            if np.isfinite(h):
                ax.annotate(f"{h:.2f}", (bar.get_x() + bar.get_width() / 2, h), ha="center", va="bottom",
                            fontsize=7, xytext=(0, 1), textcoords="offset points")
    ax.set_xticks(x, [f"{t}\n{s}" for t, s in groups], fontsize=8)
    ax.set_ylim(0, 1.2)  # room for the legend above bars at 1.0
    ax.set_ylabel("success rate")
    ax.set_title(title)
    ax.legend(fontsize=8, ncols=min(len(solvers), 4))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def write_outputs(cells: list[Cell], out: str | Path) -> dict[str, Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    md = out / "comparison.md"
    md.write_text(markdown_table(cells) + "\n")
    return {"markdown": md, "csv": write_csv(cells, out / "comparison.csv"),
            "png": bar_chart(cells, out / "comparison.png")}
