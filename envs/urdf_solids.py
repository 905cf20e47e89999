"""The solids of a generated URDF link, shared by the procedural generators (cabinets, chairs, buckets): each
solid's volume and inertia, a link's mass, centre of mass and inertia tensor (parallel-axis theorem), and the
``<link>`` element with one visual and one collision per solid. Numbers go through :func:`procedural.fmt`, so
generated files stay byte-identical across runs."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from typing import NamedTuple

import numpy as np
import trimesh

from .procedural import fmt

NO_TURN = (0.0, 0.0, 0.0)
ALONG_X = (0.0, math.pi / 2, 0.0)  # rpy turning a URDF cylinder's z axis onto x
ALONG_Y = (math.pi / 2, 0.0, 0.0)  # rpy turning a URDF cylinder's z axis onto y


class Solid(NamedTuple):
    """One visual + collision element of uniform density, in its link's frame."""

    name: str
    geometry: str  # "box" | "cylinder" | "sphere" | "mesh"
    size_m: tuple[float, ...]  # box: x y z edges; cylinder: radius, length along its z; sphere: radius; mesh: ()
    xyz_m: tuple[float, float, float]
    rpy_rad: tuple[float, float, float]
    material: str  # the name of a <material> of the robot element
    density_kg_m3: float = 1.0
    vertices: tuple[tuple[float, float, float], ...] = ()  # mesh: in the link frame
    faces: tuple[tuple[int, ...], ...] = ()  # mesh: convex polygons, counter-clockwise seen from outside

    @property
    def mesh_file(self) -> str:
        """A mesh's file, relative to the URDF."""
        return f"meshes/{self.name}.obj"


def rotation_of_rpy(rpy: tuple[float, float, float]) -> np.ndarray:
    """URDF fixed-axis roll-pitch-yaw: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return rz @ ry @ rx


def unit_mass_properties(solid: Solid) -> tuple[float, np.ndarray, np.ndarray]:
    """Volume (m^3), centre of volume (link frame, m) and inertia per unit density about that centre (link
    axes, m^5): multiply by the density for kg m^2."""
    if solid.geometry == "mesh":
        triangles = [(f[0], f[i], f[i + 1]) for f in solid.faces for i in range(1, len(f) - 1)]
        mesh = trimesh.Trimesh(np.asarray(solid.vertices), np.asarray(triangles), process=False)
        return float(mesh.volume), np.asarray(mesh.center_mass), np.asarray(mesh.moment_inertia)
    if solid.geometry == "box":
        a, b, c = solid.size_m
        volume = a * b * c
        inertia = volume / 12 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    elif solid.geometry == "cylinder":
        radius, length = solid.size_m
        volume = math.pi * radius * radius * length
        across = volume * (3 * radius * radius + length * length) / 12
        inertia = np.diag([across, across, volume * radius * radius / 2])
    elif solid.geometry == "sphere":
        (radius,) = solid.size_m
        volume = 4 / 3 * math.pi * radius**3
        inertia = np.eye(3) * 2 / 5 * volume * radius * radius
    else:
        raise ValueError(f"solid {solid.name}: unknown geometry {solid.geometry!r}")
    rot = rotation_of_rpy(solid.rpy_rad)
    return volume, np.asarray(solid.xyz_m, dtype=np.float64), rot @ inertia @ rot.T


def volume_m3(solids: list[Solid]) -> float:
    """Total volume of ``solids`` (m^3)."""
    return float(sum(unit_mass_properties(s)[0] for s in solids))


def with_density(solids: list[Solid], density_kg_m3: float) -> list[Solid]:
    """``solids`` made of one material of this density."""
    return [s._replace(density_kg_m3=density_kg_m3) for s in solids]


def with_mass(solids: list[Solid], mass_kg: float) -> list[Solid]:
    """``solids`` with the common density that gives them ``mass_kg`` together."""
    return with_density(solids, mass_kg / volume_m3(solids))


def link_inertial(solids: list[Solid]) -> tuple[float, np.ndarray, np.ndarray]:
    """Total mass (kg), centre of mass (link frame, m) and inertia tensor about it (link axes, kg m^2)."""
    props = [unit_mass_properties(s) for s in solids]
    masses = [s.density_kg_m3 * v for s, (v, _, _) in zip(solids, props)]
    total = float(sum(masses))
    com = sum(m * c for m, (_, c, _) in zip(masses, props)) / total
    tensor = np.zeros((3, 3))
    for s, m, (_, c, inertia) in zip(solids, masses, props):
        offset = c - com  # parallel-axis theorem
        tensor += s.density_kg_m3 * inertia + m * (offset @ offset * np.eye(3) - np.outer(offset, offset))
    return total, com, tensor


def add_link(robot: ET.Element, name: str, solids: list[Solid]) -> None:
    """Append ``<link name=...>`` to ``robot``: its inertial from the solids, then per solid a visual (with its
    material) and a collision element of the same geometry."""
    link = ET.SubElement(robot, "link", name=name)
    mass, com, tensor = link_inertial(solids)
    inertial = ET.SubElement(link, "inertial")
    ET.SubElement(inertial, "origin", xyz=fmt(*com), rpy="0 0 0")
    ET.SubElement(inertial, "mass", value=fmt(mass))
    ET.SubElement(
        inertial,
        "inertia",
        ixx=fmt(tensor[0, 0]),
        ixy=fmt(tensor[0, 1]),
        ixz=fmt(tensor[0, 2]),
        iyy=fmt(tensor[1, 1]),
        iyz=fmt(tensor[1, 2]),
        izz=fmt(tensor[2, 2]),
    )
    for solid in solids:
        for tag in ("visual", "collision"):
            element = ET.SubElement(link, tag, name=solid.name)
            ET.SubElement(element, "origin", xyz=fmt(*solid.xyz_m), rpy=fmt(*solid.rpy_rad))
            geometry = ET.SubElement(element, "geometry")
            if solid.geometry == "mesh":
                ET.SubElement(geometry, "mesh", filename=solid.mesh_file)
            elif solid.geometry == "box":
                ET.SubElement(geometry, "box", size=fmt(*solid.size_m))
            elif solid.geometry == "cylinder":
                ET.SubElement(geometry, "cylinder", radius=fmt(solid.size_m[0]), length=fmt(solid.size_m[1]))
            else:
                ET.SubElement(geometry, "sphere", radius=fmt(solid.size_m[0]))
            if tag == "visual":
                ET.SubElement(element, "material", name=solid.material)
