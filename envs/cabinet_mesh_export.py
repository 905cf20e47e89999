"""Generated cabinets exported as mesh-based models in PartNet-Mobility's layout, for trying ``--object``.

``export_mesh_cabinet("drawer-test-000", folder)`` writes ``folder/mobility.urdf``, ``folder/textured_objs/*.obj``,
``folder/semantics.txt`` and ``folder/meta.json``: the cabinet ``cabinet_generator`` makes for that id, with
each visual and collision a mesh file instead of a primitive, as PartNet-Mobility ships its models:
- one OBJ per PartNet-Mobility part (``cabinet_frame``, ``drawer_front``, ``drawer_box``, ``door_panel``,
  ``handle``), each solid of the generated cabinet one ``o`` object in it (boxes, 24-sided cylinders,
  icospheres); the visuals are named ``<part>-<k>`` like PartNet-Mobility's (``handle-5``);
- a bar handle of box profile is one welded U-shaped mesh (bar and posts, the posts as thick as the bar),
  not convex: loading it exercises the convex decomposition (``urdf_meshes``);
- joints, limits, dynamics, inertials and colours (URDF materials) are the generated cabinet's.

Run ``handleit export-cabinets`` to write a folder of them (the split for ``handleit eval --object``).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import trimesh

from .cabinet_generator import GENERATOR_VERSION, sample_cabinet, write_cabinet
from .urdf_solids import rotation_of_rpy

EXPORT_VERSION = "1"
CYLINDER_SECTIONS = 24
# PartNet-Mobility part of each generated solid, by the solid's name prefix.
_PART_OF_PREFIX = (
    ("handle", "handle"),
    ("drawer_front", "drawer_front"),
    ("drawer_", "drawer_box"),
    ("door_panel", "door_panel"),
)


def export_mesh_cabinet(model_id: str, folder: str | Path) -> Path:
    """Write the mesh-based copy of generated cabinet ``model_id`` into ``folder``; return its ``mobility.urdf``."""
    folder = Path(folder)
    spec = sample_cabinet(model_id)
    primitive_urdf = write_cabinet(spec, folder)  # semantics.txt, meta.json and the URDF to convert
    root = ET.parse(primitive_urdf).getroot()
    (folder / "textured_objs").mkdir(exist_ok=True)
    handles = {f"link_{i}": part.handle for i, part in enumerate(spec.parts)}
    count = 0
    for link in root.findall("link"):
        visuals = link.findall("visual")
        if not visuals:
            continue
        groups: dict[str, list[ET.Element]] = {}
        for visual in visuals:
            groups.setdefault(_part_of(visual.get("name"), link.get("name")), []).append(visual)
        for element in visuals + link.findall("collision"):
            link.remove(element)
        for part, members in groups.items():
            meshes = [_solid_mesh(v) for v in members]
            handle = handles.get(link.get("name"))
            if part == "handle" and handle is not None and handle.profile == "box" and handle.axis in "yz" \
                    and handle.shape.endswith("bar"):
                meshes = [_u_handle_mesh(handle)]
            filename = f"textured_objs/original-{count}.obj"
            _write_obj(folder / filename, meshes, [f"{part}_{i}" for i in range(len(meshes))])
            material = members[0].find("material").get("name")
            for tag in ("visual", "collision"):
                element = ET.SubElement(link, tag, name=f"{part}-{count}")
                ET.SubElement(element, "origin", xyz="0 0 0", rpy="0 0 0")
                ET.SubElement(ET.SubElement(element, "geometry"), "mesh", filename=filename)
                if tag == "visual":
                    ET.SubElement(element, "material", name=material)
            count += 1
    ET.indent(root)
    primitive_urdf.write_text('<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n")
    meta = json.loads((folder / "meta.json").read_text())
    meta.update({"exported_from": model_id, "export_version": EXPORT_VERSION, "generator_version": GENERATOR_VERSION})
    (folder / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return primitive_urdf


def export_mesh_cabinets(model_ids: list[str], out: str | Path) -> list[Path]:
    """``export_mesh_cabinet`` for each id into ``out/<id>/``: a folder ``handleit eval --object`` takes."""
    return [export_mesh_cabinet(m, Path(out) / m) for m in model_ids]


def _part_of(solid_name: str, link_name: str) -> str:
    for prefix, part in _PART_OF_PREFIX:
        if solid_name.startswith(prefix):
            return part
    return "cabinet_frame"


def _solid_mesh(visual: ET.Element) -> trimesh.Trimesh:
    """The primitive of a generated ``<visual>`` as a mesh in its link's frame."""
    origin = visual.find("origin")
    X = np.eye(4)
    X[:3, :3] = rotation_of_rpy(tuple(float(v) for v in origin.get("rpy").split()))
    X[:3, 3] = [float(v) for v in origin.get("xyz").split()]
    geometry = visual.find("geometry")[0]
    if geometry.tag == "box":
        return trimesh.creation.box(extents=[float(v) for v in geometry.get("size").split()], transform=X)
    if geometry.tag == "cylinder":  # along its z axis, as in URDF
        return trimesh.creation.cylinder(radius=float(geometry.get("radius")), height=float(geometry.get("length")),
                                         sections=CYLINDER_SECTIONS, transform=X)
    if geometry.tag == "sphere":
        sphere = trimesh.creation.icosphere(subdivisions=2, radius=float(geometry.get("radius")))
        return sphere.apply_transform(X)
    raise ValueError(f"visual {visual.get('name')}: no mesh for <{geometry.tag}>")


def _u_handle_mesh(handle) -> trimesh.Trimesh:
    """A box-profile bar handle and its two posts as one closed U-shaped mesh, in the part frame (the front
    at x = 0, the handle toward -x): the U's outline in the (x, along the bar) plane, extruded across."""
    s, t, p = handle.standoff_m, handle.thickness_m, max(0.008, 0.6 * handle.thickness_m)
    along, across = (handle.center_y_m, handle.center_z_m) if handle.axis == "y" else (handle.center_z_m,
                                                                                       handle.center_y_m)
    a0, a1 = along - handle.length_m / 2, along + handle.length_m / 2
    outline = np.array([(0, a0), (-s, a0), (-(s + t), a0), (-(s + t), a1), (-s, a1), (0, a1), (0, a1 - p),
                        (-s, a1 - p), (-s, a0 + p), (0, a0 + p)])
    triangles = np.array([(0, 1, 8), (0, 8, 9),  # first post
                          (1, 2, 3), (1, 3, 7), (1, 7, 8), (3, 4, 7),  # bar
                          (4, 5, 6), (4, 6, 7)])  # second post
    mesh = trimesh.creation.extrude_triangulation(outline, triangles, t)
    # (x, along, across) of the extrusion -> the part frame
    X = np.eye(4)
    if handle.axis == "y":
        X[:3, 3] = [0.0, 0.0, across - t / 2]
    else:
        X[:3, :3] = np.array([[1, 0, 0], [0, 0, 1], [0, 1, 0]])
        X[:3, 3] = [0.0, across - t / 2, 0.0]
    mesh.apply_transform(X)
    mesh.merge_vertices()
    trimesh.repair.fix_normals(mesh)
    return mesh


def _write_obj(path: Path, meshes: list[trimesh.Trimesh], names: list[str]) -> None:
    """One OBJ, each mesh an ``o`` object of its own (as PartNet-Mobility's part files group their pieces)."""
    lines, offset = [], 1
    for mesh, name in zip(meshes, names):
        lines.append(f"o {name}")
        lines += [f"v {x:.6f} {y:.6f} {z:.6f}" for x, y, z in mesh.vertices]
        lines += [f"f {a + offset} {b + offset} {c + offset}" for a, b, c in mesh.faces]
        offset += len(mesh.vertices)
    path.write_text("\n".join(lines) + "\n")
