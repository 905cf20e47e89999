"""Loading an articulated object (PartNet-Mobility layout) as a task object, with checks that name the problem.

PartNet-Mobility layout: a ``mobility.urdf`` whose movable parts are links attached by prismatic (drawer,
slider) or revolute (door, hinge) joints; handles by its conventions (``object_models``): visuals whose name
contains ``handle`` (``handle-5``), as ManiSkill reads them, and links labelled ``handle`` in ``semantics.txt``
fixed to a part. Mesh-based models load through ``urdf_meshes`` (meshes checked, collision meshes made convex).
Any URDF in that layout can be the object of a cabinet task, with its target link named.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import sapien

from .collision_groups import OBJECT_SELF_BIT, add_ignore_bit
from .object_model_errors import NoHandleError, TargetLinkError, URDFError
from .object_models import HANDLE_CONVENTION, is_handle_name, parse_urdf
from .urdf_meshes import loadable_urdf, mesh_files

PART_KINDS = {"drawer": "prismatic", "door": "revolute"}
# SAPIEN names a revolute joint with finite limits "revolute_unwrapped".
_JOINT_TYPES = {"drawer": ("prismatic",), "door": ("revolute", "revolute_unwrapped")}
# Cabinet surfaces: ManiSkill loads PartNet-Mobility cabinets with friction 1.
OBJECT_FRICTION = 1.0


@dataclass
class MovablePart:
    """A drawer or door of a loaded articulation."""

    link: sapien.physx.PhysxArticulationLinkComponent
    joint: sapien.physx.PhysxArticulationJoint
    joint_index: int  # index among the articulation's active joints (qpos index)
    kind: str  # "drawer" or "door"
    handle_shape_ids: np.ndarray  # render shapes of its handle (module docstring)
    link_shape_ids: np.ndarray  # all render shapes of the link and its handle links (handle included)
    q_range: tuple[float, float]
    handle_links: list = field(default_factory=list)  # links labelled "handle" in semantics.txt, fixed to it

    @property
    def entities(self) -> list[sapien.Entity]:
        """The part's link and its handle links."""
        return [self.link.entity] + [h.entity for h in self.handle_links]

    @property
    def name(self) -> str:
        return self.link.name


def check_urdf(path: str | Path) -> Path:
    """Raise ``ObjectFileNotFoundError`` or ``URDFError`` unless ``path`` is a readable URDF whose meshes exist."""
    path = Path(path)
    mesh_files(path, parse_urdf(path))
    return path


def load_articulated_object(scene: sapien.Scene, urdf_path: str | Path, scale: float = 1.0):
    """Load a fixed-base articulated object; its links do not collide with each other."""
    urdf_path = check_urdf(urdf_path)
    loader = scene.create_urdf_loader()
    loader.fix_root_link = True
    loader.scale = scale
    # Mesh collisions come as convex pieces, one <collision> each (urdf_meshes): SAPIEN keeps each as it is.
    articulation = loader.load(str(loadable_urdf(urdf_path)))
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


def _fixed_handle_links(link, handle_links: frozenset[str]) -> list:
    """Links under ``link`` by fixed joints whose names are in ``handle_links``."""
    found = []
    for child in link.children:
        if child.joint is not None and child.joint.type == "fixed":
            if child.name in handle_links:
                found.append(child)
            found += _fixed_handle_links(child, handle_links)
    return found


def movable_parts(articulation, handle_links: frozenset[str] = frozenset()) -> list[MovablePart]:
    """Every link driven by a prismatic or revolute joint with a finite range; ``handle_links``: links whose
    visuals are all handle (``object_models.handle_link_names``)."""
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
        extra = _fixed_handle_links(joint.child_link, handle_links)
        extra_shapes = [shape for h in extra for shape in _render_shapes(h)]
        handle_ids = [s.per_scene_id for s in shapes if is_handle_name(s.name)] + [s.per_scene_id for s in extra_shapes]
        parts.append(
            MovablePart(
                link=joint.child_link,
                joint=joint,
                joint_index=active.index(joint),
                kind=kind,
                handle_shape_ids=np.array(handle_ids, dtype=np.int64),
                link_shape_ids=np.array([s.per_scene_id for s in shapes + extra_shapes], dtype=np.int64),
                q_range=(lower, upper),
                handle_links=extra,
            )
        )
    return parts


def select_target(articulation, kind: str, link_name: str | None, rng: np.random.Generator,
                  handle_links: frozenset[str] = frozenset(), source: str | Path | None = None) -> MovablePart:
    """The named target part, or a random one of ``kind`` with a handle. Errors name what is wrong and
    ``source`` (the URDF's path) when given."""
    if kind not in PART_KINDS:
        raise ValueError(f"unknown part kind {kind!r}; choose one of {sorted(PART_KINDS)}")
    parts = movable_parts(articulation, handle_links)
    candidates = [p for p in parts if p.kind == kind and len(p.handle_shape_ids) > 0]
    name = f"{articulation.name!r}" + (f" ({source})" if source is not None else "")
    if link_name is None:
        if not candidates:
            raise NoHandleError(f"object {name} has no {kind} with a handle: looked for {HANDLE_CONVENTION}")
        return candidates[int(rng.integers(len(candidates)))]

    links = {l.name: l for l in articulation.links}
    if link_name not in links:
        raise TargetLinkError(f"object {name} has no link {link_name!r}; its links are {sorted(links)}")
    joint = links[link_name].joint
    expected = PART_KINDS[kind]
    if joint is None or joint.type not in _JOINT_TYPES[kind]:
        jtype = "none (root link)" if joint is None else joint.type
        openable = joint is not None and joint.type in _JOINT_TYPES["drawer"] + _JOINT_TYPES["door"]
        raise TargetLinkError(
            f"target link {link_name!r} of {name} is not a {kind}: its joint is {jtype}, a {kind} needs a "
            f"{expected} joint{'' if openable else ' (this one is neither prismatic nor revolute)'}. Links that "
            f"qualify: {[p.name for p in candidates] or 'none'}"
        )
    part = next((p for p in parts if p.name == link_name), None)
    if part is None:
        raise TargetLinkError(f"target link {link_name!r} of {name}: its {expected} joint has no finite range")
    if len(part.handle_shape_ids) == 0:
        raise NoHandleError(f"target link {link_name!r} of {name} has no handle: looked for {HANDLE_CONVENTION}")
    return part
