"""Loading an articulated object (PartNet-Mobility layout) as a task object, with checks that name the problem.

PartNet-Mobility layout: a ``mobility.urdf`` whose movable parts are links attached by prismatic (drawer,
slider) or revolute (door, hinge) joints; handles are visuals whose name contains ``handle``, as ManiSkill
reads them. Any URDF in that layout can be the object of a cabinet task, with its target link named.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sapien

from .collision_groups import OBJECT_SELF_BIT, add_ignore_bit

PART_KINDS = {"drawer": "prismatic", "door": "revolute"}
# SAPIEN names a revolute joint with finite limits "revolute_unwrapped".
_JOINT_TYPES = {"drawer": ("prismatic",), "door": ("revolute", "revolute_unwrapped")}
# Cabinet surfaces: ManiSkill loads PartNet-Mobility cabinets with friction 1.
OBJECT_FRICTION = 1.0


class URDFError(ValueError):
    """A URDF that cannot be used: malformed, or missing files it references."""


@dataclass
class MovablePart:
    """A drawer or door of a loaded articulation."""

    link: sapien.physx.PhysxArticulationLinkComponent
    joint: sapien.physx.PhysxArticulationJoint
    joint_index: int  # index among the articulation's active joints (qpos index)
    kind: str  # "drawer" or "door"
    handle_shape_ids: np.ndarray  # render shapes whose visual name contains "handle"
    link_shape_ids: np.ndarray  # all render shapes of the link (handle included)
    q_range: tuple[float, float]

    @property
    def name(self) -> str:
        return self.link.name


def check_urdf(path: str | Path) -> Path:
    """Raise ``FileNotFoundError`` or ``URDFError`` unless ``path`` is a readable URDF whose meshes exist."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"URDF not found: {path}")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise URDFError(f"malformed URDF {path}: {e}") from None
    if root.tag != "robot":
        raise URDFError(f"malformed URDF {path}: the root element is <{root.tag}>, expected <robot>")
    if root.find("link") is None:
        raise URDFError(f"URDF {path} defines no <link>")
    for mesh in root.iter("mesh"):
        filename = mesh.get("filename")
        if not filename:
            raise URDFError(f"URDF {path}: a <mesh> has no filename")
        if filename.startswith("package://"):
            raise URDFError(f"URDF {path}: package:// paths are not resolved here ({filename}); use relative paths")
        mesh_path = Path(filename) if Path(filename).is_absolute() else path.parent / filename
        if not mesh_path.is_file():
            raise URDFError(f"URDF {path} references a mesh that does not exist: {mesh_path}")
    return path


def load_articulated_object(scene: sapien.Scene, urdf_path: str | Path, scale: float = 1.0):
    """Load a fixed-base articulated object; its links do not collide with each other."""
    urdf_path = check_urdf(urdf_path)
    loader = scene.create_urdf_loader()
    loader.fix_root_link = True
    loader.scale = scale
    loader.load_multiple_collisions_from_file = True  # PartNet-Mobility ships convex decompositions
    articulation = loader.load(str(urdf_path))
    if articulation is None:
        raise URDFError(f"SAPIEN could not build an articulation from {urdf_path}")
    material = sapien.physx.PhysxMaterial(OBJECT_FRICTION, OBJECT_FRICTION, 0.0)
    for link in articulation.links:
        for shape in link.collision_shapes:
            add_ignore_bit(shape, OBJECT_SELF_BIT)
            shape.set_physical_material(material)
    return articulation


def _render_shapes(link) -> list:
    body = link.entity.find_component_by_type(sapien.render.RenderBodyComponent)
    return [] if body is None else list(body.render_shapes)


def movable_parts(articulation) -> list[MovablePart]:
    """Every link driven by a prismatic or revolute joint with a finite range."""
    active = list(articulation.active_joints)
    parts = []
    for joint in active:
        kind = next((k for k, types in _JOINT_TYPES.items() if joint.type in types), None)
        if kind is None:
            continue
        lower, upper = (float(x) for x in joint.limit[0])
        if not (np.isfinite(lower) and np.isfinite(upper)) or upper <= lower:
            continue
        shapes = _render_shapes(joint.child_link)
        parts.append(
            MovablePart(
                link=joint.child_link,
                joint=joint,
                joint_index=active.index(joint),
                kind=kind,
                handle_shape_ids=np.array([s.per_scene_id for s in shapes if "handle" in s.name], dtype=np.int64),
                link_shape_ids=np.array([s.per_scene_id for s in shapes], dtype=np.int64),
                q_range=(lower, upper),
            )
        )
    return parts


def select_target(articulation, kind: str, link_name: str | None, rng: np.random.Generator) -> MovablePart:
    """The named target part, or a random one of ``kind`` with a handle. Errors name what is wrong."""
    if kind not in PART_KINDS:
        raise ValueError(f"unknown part kind {kind!r}; choose one of {sorted(PART_KINDS)}")
    parts = movable_parts(articulation)
    candidates = [p for p in parts if p.kind == kind and len(p.handle_shape_ids) > 0]
    name = articulation.name
    if link_name is None:
        if not candidates:
            raise ValueError(f"object {name!r} has no {kind} with a handle (a visual whose name contains 'handle')")
        return candidates[int(rng.integers(len(candidates)))]

    links = {l.name: l for l in articulation.links}
    if link_name not in links:
        raise ValueError(f"object {name!r} has no link {link_name!r}; its links are {sorted(links)}")
    joint = links[link_name].joint
    expected = PART_KINDS[kind]
    if joint is None or joint.type not in _JOINT_TYPES[kind]:
        jtype = "none (root link)" if joint is None else joint.type
        raise ValueError(
            f"target link {link_name!r} of {name!r} is not a {kind}: its joint is {jtype}, a {kind} needs a "
            f"{expected} joint. Links that qualify: {[p.name for p in candidates] or 'none'}"
        )
    part = next((p for p in parts if p.name == link_name), None)
    if part is None:
        raise ValueError(f"target link {link_name!r} of {name!r}: its {expected} joint has no finite range")
    if len(part.handle_shape_ids) == 0:
        raise ValueError(f"target link {link_name!r} of {name!r} has no handle (no visual whose name contains 'handle')")
    return part
