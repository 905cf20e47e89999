"""Learning curves of a training run: a CSV and a plot (PNG) beside its checkpoint.

``<checkpoint>.curve.csv``: one row every ``every`` steps (and at each evaluation): ``step``, ``wall_s`` (the run's
wall time when that step ended, s, over all its sittings), each loss averaged over the steps since the row
before, and where an evaluation ran at that step ``eval_success`` (share of successful episodes),
``eval_episodes`` and ``eval_seeds``. ``<checkpoint>.curve.png``: the losses (log scale) over the steps,
and the evaluation success under them. Both are rewritten whole, atomically, from the run's history, so that
a resumed run's curves are the same as an uninterrupted one's.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np

from handleit.baselines.checkpoint import write_atomically

EVAL_COLUMNS = ("eval_success", "eval_episodes", "eval_seeds")


def curve_paths(checkpoint: str | Path) -> tuple[Path, Path]:
    """The CSV and PNG of a checkpoint: ``<dir>/<name>.curve.csv`` and ``.curve.png``."""
    checkpoint = Path(checkpoint)
    stem = checkpoint.name[: -len(checkpoint.suffix)] if checkpoint.suffix else checkpoint.name
    return checkpoint.with_name(stem + ".curve.csv"), checkpoint.with_name(stem + ".curve.png")


def curve_rows(log, evaluations: list[dict], every: int) -> list[dict]:
    """The CSV's rows (see the module docstring) from a :class:`~handleit.baselines.training.TrainLog`."""
    n = len(log.wall_at_step)
    by_step = {int(e["step"]): e for e in evaluations}
    steps = sorted({s for s in range(every, n + 1, every)} | ({n} if n else set()) | {s for s in by_step if s <= n})
    rows, last = [], 0
    for step in steps:
        row = {"step": step, "wall_s": round(log.wall_at_step[step - 1], 2) if step else 0.0}
        for k, values in log.history.items():
            window = values[last:step]
            row[k] = float(np.mean(window)) if window else ""
        e = by_step.get(step)
        row |= {"eval_success": e.get("success", "") if e else "", "eval_episodes": e.get("episodes", "") if e else "",
                "eval_seeds": e.get("seeds", "") if e else ""}
        rows.append(row)
        last = step
    return rows


def write_curves(csv_path: Path, png_path: Path | None, log, evaluations: list[dict], every: int = 100) -> None:
    rows = curve_rows(log, evaluations, max(1, every))
    columns = ["step", "wall_s", *log.history.keys(), *EVAL_COLUMNS]
    text = io.StringIO()
    writer = csv.DictWriter(text, columns)
    writer.writeheader()
    writer.writerows(rows)
    write_atomically(Path(csv_path), lambda f: f.write(text.getvalue().encode()))
    if png_path is not None and rows:
        _plot(Path(png_path), rows, list(log.history.keys()), evaluations)


def _plot(path: Path, rows: list[dict], losses: list[str], evaluations: list[dict]) -> None:
    import matplotlib  # lazy: only the learning-curve plot needs it

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt  # lazy: as above

    fig, (ax_loss, ax_eval) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    steps = np.array([r["step"] for r in rows])
    for k in losses:
        values = np.array([np.nan if r[k] == "" else float(r[k]) for r in rows])
        positive = values > 0
        if positive.any():  # a log scale shows only the positive part of a loss (TD3+BC's Q, actor loss can be < 0)
            ax_loss.plot(steps[positive], values[positive], label=k)
    ax_loss.set_yscale("log")
    ax_loss.set_ylabel("training loss (mean per row)")
    ax_loss.legend(fontsize=8)
    ax_loss.grid(alpha=0.3)
    if evaluations:
        e_steps = [int(e["step"]) for e in evaluations]
        ax_eval.plot(e_steps, [float(e.get("success", np.nan)) for e in evaluations], "o-", color="tab:green")
    ax_eval.set_ylim(-0.05, 1.05)
    ax_eval.set_ylabel("evaluation success")
    ax_eval.set_xlabel("gradient step")
    ax_eval.grid(alpha=0.3)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    write_atomically(path, lambda f: f.write(buffer.getvalue()))
