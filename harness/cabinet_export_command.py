"""``handleit export-cabinets``: generated cabinets written as mesh-based models in PartNet-Mobility's layout
(``handleit.envs.cabinet_mesh_export``), a folder that ``handleit eval --object`` takes."""

from __future__ import annotations

import argparse
import sys

from handleit.envs.cabinet_generator import cabinet_ids
from handleit.envs.cabinet_mesh_export import export_mesh_cabinets

_KINDS = {"OpenCabinetDrawer": "drawer", "OpenCabinetDoor": "door"}


def _export(args: argparse.Namespace) -> int:
    """Write mesh-based copies of generated cabinets into OUT/<id>/ (mobility.urdf, textured_objs/, semantics.txt)."""
    available = cabinet_ids(_KINDS[args.task], args.split)
    ids = args.ids.split(",") if args.ids else available[: args.count]
    unknown = [m for m in ids if m not in available]
    if unknown:
        print(f"handleit export-cabinets: unknown ids {unknown}; {args.task} {args.split} has {available}",
              file=sys.stderr)
        return 2
    for urdf in export_mesh_cabinets(ids, args.out):
        print(urdf)
    print(f"{len(ids)} cabinets in {args.out}: handleit eval --task {args.task} --object {args.out}")
    return 0


def add_commands(sub) -> None:
    ex = sub.add_parser("export-cabinets", help=_export.__doc__)
    ex.add_argument("--task", default="OpenCabinetDrawer", choices=sorted(_KINDS), help="whose cabinets")
    ex.add_argument("--split", default="test", choices=["train", "test"])
    ex.add_argument("--count", type=int, default=4, help="the first COUNT cabinets of the split")
    ex.add_argument("--ids", help="these cabinet ids instead, separated by commas (e.g. door-test-000,door-test-004)")
    ex.add_argument("--out", required=True, help="the folder to write, one model folder per cabinet")
    ex.set_defaults(func=_export)
