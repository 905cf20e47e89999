"""The behavior trees on mesh-based cabinets from disk (``--object``) against the primitive originals.

Exports the first N cabinets of a bundled split as mesh-based models in PartNet-Mobility's layout
(``handleit export-cabinets``: OBJ meshes, non-convex bar handles decomposed by CoACD when loaded) into
OUT/mesh/, copies the generated primitive originals (boxes, cylinders, spheres) into OUT/primitive/, and runs
the task's tree on both folders through ``--object``: the same models, target links and seeds, so the two
columns differ only in the geometry's representation. Prints the success of each and writes the records
to OUT/records.jsonl (``--resume`` skips episodes already there).

    python benchmarks/object_models_vs_primitives.py --episodes 10 --max-steps 1000 --out outputs/object_models
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from handleit.envs.cabinet_generator import cabinet_ids, cabinet_urdf
from handleit.envs.cabinet_mesh_export import export_mesh_cabinets
from handleit.harness.evaluation import episode_specs, object_split, run_episodes, summarize
from handleit.harness.executor import LocalProcesses

KINDS = {"OpenCabinetDrawer": "drawer", "OpenCabinetDoor": "door"}


def model_folders(task: str, split: str, count: int, out: Path) -> tuple[Path, Path]:
    """OUT/<task>/mesh and OUT/<task>/primitive, each holding the first ``count`` cabinets of the split."""
    ids = cabinet_ids(KINDS[task], split)[:count]
    mesh, primitive = out / task / "mesh", out / task / "primitive"
    if not mesh.is_dir():
        export_mesh_cabinets(ids, mesh)
    if not primitive.is_dir():
        for model_id in ids:
            shutil.copytree(cabinet_urdf(model_id).parent, primitive / model_id)
    return mesh, primitive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default="OpenCabinetDrawer,OpenCabinetDoor")
    parser.add_argument("--split", default="test", help="the bundled split whose cabinets are exported")
    parser.add_argument("--models", type=int, default=10, help="cabinets per task (the first of the split)")
    parser.add_argument("--episodes", type=int, default=10, help="episodes per task and folder")
    parser.add_argument("--max-steps", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="outputs/object_models")
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    out = Path(args.out)
    specs = []
    for task in args.tasks.split(","):
        mesh, primitive = model_folders(task, args.split, args.models, out)
        for folder in (mesh, primitive):
            specs += episode_specs(task, object_split(folder), args.episodes, "bt", args.max_steps, args.seed)
    # Episode by episode across tasks and folders, so that a run cut short still compares like with like.
    specs.sort(key=lambda s: s.index)
    records = run_episodes(specs, out / "records.jsonl", workers=args.workers, resume=args.resume)
    wanted = {s.key for s in specs}
    mine = [r for r in records if r.key in wanted]
    print(summarize(mine))
    print("\n| task | models | episodes | mesh (OBJ, CoACD) | primitive originals |")
    print("| --- | --- | ---: | ---: | ---: |")
    for task in args.tasks.split(","):
        cells = []
        for kind in ("mesh", "primitive"):
            rs = [r for r in mine if r.task == task and r.split == object_split(out / task / kind)]
            cells.append(f"{sum(r.success for r in rs) / max(len(rs), 1):.2f} ({sum(r.success for r in rs)}/{len(rs)})")
        print(f"| {task} | {args.split} split, first {args.models} | {args.episodes} | {cells[0]} | {cells[1]} |")
    errors = [r for r in mine if r.error]
    for r in errors[:3]:
        print(f"\nerror in {r.task} {r.split} seed {r.seed} ({r.model_id}):\n{r.error}")


if __name__ == "__main__":
    main()
