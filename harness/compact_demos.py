"""Compact copies of demonstration files, to carry training data where bytes count (``handleit compact-demos``).

A recorded drawer demonstration holds 1200 points per observation as float32 (about 2.2 MB per demonstration
after the recorder's gzip): 200 of them do not fit a 64 MiB transfer to a GPU machine. The compact copy has
the same layout (``baselines/demo_files.py``), so that :func:`~handleit.baselines.dataset.load_demo_data` and
``handleit train`` read it unchanged, with:

- ``points`` points per observation: a uniform subset, without replacement, of the recorded ones. The recorded
  points are themselves a uniform sample of the cloud, so the copy is what the recorder would have written with
  ``--points <points>``; the JSON's ``points`` says so, and a policy trained on the copy draws that many points
  from the live cloud when it acts (``baselines/policy.py``), as in training.
- the positions on a grid of 10^-``decimals`` m (3: 1 mm) by HDF5's scale-offset filter (lossy: stored as small
  integers, read back as float32; off by at most 10^-``decimals`` m, mostly by under half of it: 0.05% of a drawer
  file's coordinates are off by 0.5-1 mm); None keeps them exact;
- every step's points in one order (by their mask channels, then x): the networks pool over the points and the
  features draw random subsets of them, so the order carries nothing, and sorted points compress better;
- gzip level 9; one chunk per dataset and episode, except the positions (h5py's chunks, see the code).

Everything else (joints, poses, goals, actions, rewards, flags, the expert's terminal labels, the episodes'
metadata, the source's failed rollouts) is copied as it is. Written through the recorder's
:class:`~handleit.harness.demos.DemoFileWriter`: each episode appears whole or not at all, and ``resume``
continues a copy that was cut off.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import h5py
import numpy as np

from handleit.baselines.demo_files import TERMINAL_ACTION_KEY, iter_demos, load_demo_info
from handleit.baselines.features import subsample_indices
from handleit.harness.demos import DemoFileWriter, write_part

COMPACT_METHOD = "uniform point subset per observation, sorted by mask channels then x; scale-offset positions; gzip 9"


def compact_points(cloud: dict[str, np.ndarray], mask_names: tuple[str, ...], points: int,
                   rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One episode's clouds (``xyz`` [T+1, P, 3], ``rgb`` [T+1, P, 3], one [T+1, P] bool per mask) cut to
    ``points`` per step (a uniform subset without replacement; all P when ``points >= P``), each step's points
    sorted by their mask channels, then x."""
    xyz = np.asarray(cloud["xyz"])
    steps, recorded = xyz.shape[:2]
    if points < 1:
        raise ValueError(f"points must be >= 1, got {points}")
    keep = min(points, recorded)
    index = np.stack([np.sort(subsample_indices(recorded, keep, rng)) for _ in range(steps)])
    rows = np.arange(steps)[:, None]
    out = {key: np.asarray(value)[rows, index] for key, value in cloud.items()}
    # Sort key: the mask channels as the bits of an integer (masks first), then x within a group.
    group = sum(out[m].astype(np.int64) << i for i, m in enumerate(mask_names)) if mask_names else 0
    x = out["xyz"][..., 0].astype(np.float64)
    order = np.lexsort((x, np.broadcast_to(group, x.shape)), axis=-1)
    return {key: np.take_along_axis(value, order if value.ndim == 2 else order[..., None], 1)
            for key, value in out.items()}


def write_compact_episode(path: Path, demo: dict, mask_names: tuple[str, ...], points: int, decimals: int | None,
                          rng: np.random.Generator) -> Path:
    """One demonstration (as :func:`~handleit.baselines.demo_files.iter_demos` yields it) compacted into a part
    file (group ``traj``) for :meth:`DemoFileWriter.append`, through a temporary name (``write_part``)."""
    cloud = compact_points(demo["obs"]["pointcloud"], mask_names, points, rng)

    def fill(group: h5py.Group) -> None:
        for key, value in cloud.items():
            options = {"compression": "gzip", "compression_opts": 9, "chunks": value.shape}
            if key == "xyz":
                # h5py's own chunks (a few dozen steps, a hundred points, one coordinate): the scale-offset filter
                # packs each chunk with the bits its range needs, and sorted points give narrow ranges (27%
                # smaller than one chunk per episode on a drawer demonstration).
                value, options["chunks"] = value.astype(np.float32), True
                options |= {"scaleoffset": int(decimals)} if decimals is not None else {"shuffle": True}
            group.create_dataset(f"obs/pointcloud/{key}", data=value, **options)
        for section, values in demo["obs"].items():
            if section == "pointcloud":
                continue
            for key, value in values.items():
                group.create_dataset(f"obs/{section}/{key}", data=value, compression="gzip", compression_opts=9,
                                     shuffle=True, chunks=value.shape if value.ndim else None)
        for key in ("actions", "rewards", "success", "terminated", "truncated"):
            group.create_dataset(key, data=demo[key])
        if demo[TERMINAL_ACTION_KEY] is not None:
            group.create_dataset(TERMINAL_ACTION_KEY, data=demo[TERMINAL_ACTION_KEY])
        meta = {k: v for k, v in demo["episode"].items() if k not in ("episode_id", "elapsed_steps")}
        group.attrs["episode"] = json.dumps(meta)

    return write_part(path, fill)


def compact_demos(src: Path | str, out: Path | str, points: int, decimals: int | None = 3, seed: int = 0,
                  episodes: int | None = None, resume: bool = False, log=print, first: int = 0) -> dict:
    """Write ``<out>/<task>.h5`` (+ .json): ``episodes`` (default all) demonstrations of ``src`` from its
    ``first``-th on, with ``points`` points per observation and positions rounded to ``decimals`` (module
    docstring). Episode i's subsets are drawn from ``default_rng([seed, episode_id])``. Parts of one file (each
    its own ``first`` and ``out``) are read together by ``load_demo_data`` and ``handleit train --data``: a copy
    too large for one transfer travels in parts. Returns counts and sizes."""
    src, out = Path(src), Path(out)
    if not src.exists():
        raise FileNotFoundError(f"no demo file {src}")
    if (out / src.name).resolve() == src.resolve():
        raise ValueError(f"--out {out} would overwrite the source {src}; choose another folder")
    if first < 0:
        raise ValueError(f"first must be >= 0, got {first}")
    if decimals is not None and not 0 <= decimals <= 6:
        raise ValueError(f"decimals must be 0 to 6 (or None: exact), got {decimals}")
    doc = load_demo_info(src)
    info = doc["env_info"]
    recorded = int(info["obs_config"]["points"])
    kept_points = min(points, recorded)
    mask_names = tuple(info["obs_config"]["mask_names"])
    out_info = dict(info, points=kept_points, obs_config=dict(info["obs_config"], points=kept_points),
                    source={"file": src.name, "source": info.get("source"), "method": COMPACT_METHOD,
                            "recorded_points": recorded, "points": kept_points, "position_decimals": decimals,
                            "seed": seed})
    sources = doc["episodes"][first:None if episodes is None else first + episodes]
    if not sources:
        raise ValueError(f"{src} holds {len(doc['episodes'])} demonstrations: none from the {first}-th on")
    stats = {"compacted": 0, "skipped": 0, "transitions": 0}
    with DemoFileWriter(out, src.stem, out_info, resume) as writer:
        done = writer.done_keys()
        pending = [e for e in sources if DemoFileWriter.key(e) not in done]
        stats["skipped"] = len(sources) - len(pending)
        for failure in doc.get("failed_episodes", []) if first == 0 else []:  # listed once, with the first part
            if DemoFileWriter.key(failure) not in done:
                writer.add_failure(failure)
        if log:
            positions = "exact" if decimals is None else f"to 1e-{decimals} m"
            log(f"{src} -> {writer.h5_path}: {len(pending)} demos to compact ({stats['skipped']} done), "
                f"{recorded} -> {kept_points} points, positions {positions}")
        for demo in iter_demos(src, episode_ids=[e["episode_id"] for e in pending]):
            entry = demo["episode"]
            rng = np.random.default_rng([seed, int(entry["episode_id"])])
            part = writer.parts_dir / f"{entry['split']}-{entry['seed']}-{entry['model_id']}.h5"
            writer.append(write_compact_episode(part, demo, mask_names, points, decimals, rng))
            stats["compacted"] += 1
            stats["transitions"] += len(demo["actions"])
    stats.update(h5=str(writer.h5_path), json=str(writer.json_path), bytes=writer.h5_path.stat().st_size,
                 source_bytes=src.stat().st_size, points=kept_points,
                 demos=len(load_demo_info(writer.h5_path)["episodes"]))
    return stats


# ----------------------------------------------------------------------------------------------------
# Command line: `handleit compact-demos`
# ----------------------------------------------------------------------------------------------------
def add_commands(subparsers) -> None:
    """Add ``compact-demos`` to the ``handleit`` command line."""
    cmd = subparsers.add_parser("compact-demos", help="a smaller copy of a demo file that training reads unchanged: "
                                "fewer points per observation, rounded positions, gzip 9")
    cmd.add_argument("--in", dest="src", required=True, help="a demo file, e.g. demos/OpenCabinetDrawer.h5")
    cmd.add_argument("--out", required=True, help="output folder (same file names, same layout)")
    cmd.add_argument("--points", type=int, required=True, help="points per observation to keep (a uniform subset)")
    cmd.add_argument("--decimals", type=int, default=3,
                     help="positions on a grid of 10^-N m (default 3: 1 mm; lossy, within 1 mm); -1 keeps them exact")
    cmd.add_argument("--seed", type=int, default=0, help="draws the point subsets")
    cmd.add_argument("--episodes", type=int, default=None, help="only N demonstrations (default: all)")
    cmd.add_argument("--first", type=int, default=0,
                     help="start at the demonstration with this index (0-based): one part of a copy made in parts")
    cmd.add_argument("--resume", action="store_true", help="continue a copy that was cut off")
    cmd.set_defaults(func=_compact_command)


def _compact_command(args) -> int:
    try:
        stats = compact_demos(args.src, args.out, args.points, None if args.decimals < 0 else args.decimals,
                              args.seed, args.episodes, args.resume, first=args.first)
    except (FileExistsError, FileNotFoundError, ValueError) as error:
        print(f"handleit compact-demos: {error}", file=sys.stderr)
        return 2
    print(f"{Path(args.src).name}: {stats['compacted']} demos compacted ({stats['skipped']} already done; "
          f"{stats['transitions']} transitions), {stats['points']} points each; "
          f"{stats['source_bytes'] / 2**20:.1f} MiB -> {stats['bytes'] / 2**20:.1f} MiB ({stats['demos']} demos): "
          f"{stats['h5']}")
    return 0
