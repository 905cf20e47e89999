"""URDF and SRDF of the ManiSkill1 mobile Panda, generated from the meshes that mani-skill installs.

mani-skill ships ``mobile_panda_single_arm.urdf`` and ``mobile_panda_dual_arm.urdf`` (the exact ManiSkill1
challenge robots: base joints x, y, yaw, torso height, one or two sideways-mounted Panda arms on a
Sciurus17 body), but they reference ``.dae`` visual meshes that the wheel does not contain, so they do not
load. We rewrite them:

- visual geometry = the low-poly collision meshes (tens to hundreds of triangles per Panda link instead of
  ~20k in the ``.glb`` files): software-Vulkan rendering cost is dominated by triangle count
  (shared/SETUP-NOTES.md), and point clouds need geometry, not texture;
- plain colors per part, so the rgb of the point cloud distinguishes robot parts;
- non-standard tags (``safety_controller``, ``D``/``K``/``mu_*`` dynamics attributes) removed, so Drake and
  mplib parse the file without warnings;
- meshes copied beside the URDF and referenced by relative paths, which SAPIEN, mplib and Drake all resolve.

The SRDF disables collision checks between adjacent links and between link pairs that collide in (nearly)
every sampled configuration, computed with mplib's own collision model (the MoveIt setup-assistant method).

The stationary Panda of the tabletop tasks (:func:`panda_arm`) is generated the same way from mani-skill's
``panda_v2.urdf`` (ManiSkill's Panda: joints ``panda_joint1..7``, ``panda_finger_joint1/2``, TCP link
``panda_hand_tcp``).
"""

from __future__ import annotations

import hashlib
import shutil
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import trimesh

from .asset_cache import build_once, cache_dir

ArmLayout = Literal["single", "dual"]
DESCRIPTION_VERSION = "4"

BASE_JOINT_NAMES = ("root_x_axis_joint", "root_y_axis_joint", "root_z_rotation_joint", "linear_actuator_height")
_ARM_JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))
_FINGER_JOINTS = ("panda_finger_joint1", "panda_finger_joint2")

# Colors (rgba) per part; the hand and fingers are dark so that they stand out against light handles.
_COLORS = {
    "body": (0.85, 0.85, 0.82, 1.0),
    "arm": (0.93, 0.93, 0.93, 1.0),
    "hand": (0.25, 0.25, 0.28, 1.0),
    "finger": (0.15, 0.15, 0.17, 1.0),
}
_SRDF_SAMPLES = 3000
_ALWAYS_COLLIDING_SHARE = 0.99  # a pair colliding in more samples than this is adjacent in effect


@dataclass(frozen=True)
class MobilePandaDescription:
    """Where the robot's files are, and the names a controller needs."""

    arms: ArmLayout
    urdf_path: Path
    srdf_path: Path
    sides: tuple[str, ...]  # "right" (single arm) or ("left", "right")

    @property
    def base_joint_names(self) -> tuple[str, ...]:
        return BASE_JOINT_NAMES

    def arm_joint_names(self, side: str) -> tuple[str, ...]:
        return tuple(f"{side}_{j}" for j in _ARM_JOINTS)

    def finger_joint_names(self, side: str) -> tuple[str, ...]:
        return tuple(f"{side}_{j}" for j in _FINGER_JOINTS)

    def tcp_link_name(self, side: str) -> str:
        return f"{side}_panda_hand_tcp"

    def hand_link_name(self, side: str) -> str:
        return f"{side}_panda_hand"

    @property
    def camera_mount_link_name(self) -> str:
        # Below the torso's height joint: the cameras stay at a fixed height, as in ManiSkill1.
        return "mobile_base"

    @property
    def base_link_name(self) -> str:
        """The link whose pose is the robot's base pose X_WB (ground level, x forward)."""
        return "mobile_base"


ARM_SIDE = "arm"  # the one arm side of the stationary Panda


@dataclass(frozen=True)
class PandaArmDescription:
    """The stationary Panda (mani-skill's ``panda_v2``): no base joints, one arm side named ``"arm"``; the
    same interface as :class:`MobilePandaDescription`."""

    urdf_path: Path
    srdf_path: Path
    sides: tuple[str, ...] = (ARM_SIDE,)

    @property
    def base_joint_names(self) -> tuple[str, ...]:
        return ()  # fixed to the table

    def _check_side(self, side: str) -> None:
        if side not in self.sides:
            raise ValueError(f"unknown arm side {side!r}; the stationary Panda has {self.sides}")

    def arm_joint_names(self, side: str = ARM_SIDE) -> tuple[str, ...]:
        self._check_side(side)
        return _ARM_JOINTS

    def finger_joint_names(self, side: str = ARM_SIDE) -> tuple[str, ...]:
        self._check_side(side)
        return _FINGER_JOINTS

    def tcp_link_name(self, side: str = ARM_SIDE) -> str:
        self._check_side(side)
        return "panda_hand_tcp"

    def hand_link_name(self, side: str = ARM_SIDE) -> str:
        self._check_side(side)
        return "panda_hand"

    @property
    def camera_mount_link_name(self) -> str:
        return "panda_hand"  # the hand camera rides on the hand; fixed cameras are mounted in the world

    @property
    def base_link_name(self) -> str:
        """The robot's root link, bolted to the table: its pose is X_WB."""
        return "panda_link0"



def _mani_skill_panda_dir() -> Path:
    try:
        import mani_skill  # lazy: mani_skill, for its robot meshes' folder
    except ImportError as e:  # pragma: no cover - mani-skill is a declared dependency
        raise ImportError("mani-skill is required for the Panda and Sciurus17 meshes: pip install mani-skill==3.0.1") from e
    folder = Path(mani_skill.__file__).parent / "assets" / "robots" / "panda"
    if not folder.is_dir():
        raise FileNotFoundError(f"mani-skill's Panda assets are missing at {folder}; reinstall mani-skill==3.0.1")
    return folder


def mobile_panda(arms: ArmLayout = "single") -> MobilePandaDescription:
    """Generate (once, cached) and return the description of the single- or dual-arm mobile Panda."""
    if arms not in ("single", "dual"):
        raise ValueError(f"arms must be 'single' or 'dual', got {arms!r}")
    src = _mani_skill_panda_dir() / f"mobile_panda_{arms}_arm.urdf"
    if not src.is_file():
        raise FileNotFoundError(f"mani-skill's robot description {src} is missing; reinstall mani-skill==3.0.1")
    key = hashlib.sha1(src.read_bytes() + DESCRIPTION_VERSION.encode()).hexdigest()[:10]
    name = f"mobile_panda_{arms}_arm"
    folder = build_once(cache_dir() / "robots" / f"{name}-{key}", lambda tmp: _write_description(src, tmp, name))
    sides = ("right",) if arms == "single" else ("left", "right")
    return MobilePandaDescription(arms, folder / f"{name}.urdf", folder / f"{name}.srdf", sides)


def panda_arm() -> PandaArmDescription:
    """Generate (once, cached) and return the description of the stationary Panda (from ``panda_v2.urdf``)."""
    src = _mani_skill_panda_dir() / "panda_v2.urdf"
    if not src.is_file():
        raise FileNotFoundError(f"mani-skill's robot description {src} is missing; reinstall mani-skill==3.0.1")
    key = hashlib.sha1(src.read_bytes() + DESCRIPTION_VERSION.encode()).hexdigest()[:10]
    name = "panda_arm"
    folder = build_once(cache_dir() / "robots" / f"{name}-{key}", lambda tmp: _write_description(src, tmp, name))
    return PandaArmDescription(folder / f"{name}.urdf", folder / f"{name}.srdf")


def _part_of(link_name: str) -> str:
    if "finger" in link_name:
        return "finger"
    if "hand" in link_name:
        return "hand"
    if "panda_link" in link_name:
        return "arm"
    return "body"


def _write_description(src: Path, out: Path, name: str) -> None:
    tree = ET.parse(src)
    robot = tree.getroot()
    robot.set("name", name)
    for elem in list(robot):
        if elem.tag == "material":
            robot.remove(elem)
    for part, rgba in _COLORS.items():
        material = ET.SubElement(robot, "material", name=f"handleit_{part}")
        ET.SubElement(material, "color", rgba=" ".join(f"{c:g}" for c in rgba))

    meshes: set[str] = set()
    for link in robot.iter("link"):
        for visual in link.findall("visual"):
            mesh = visual.find("geometry/mesh")
            if mesh is not None:
                mesh.set("filename", _low_poly_visual(mesh.get("filename")))
            for old in visual.findall("material"):
                visual.remove(old)
            ET.SubElement(visual, "material", name=f"handleit_{_part_of(link.get('name'))}")
        for mesh in link.iter("mesh"):
            meshes.add(mesh.get("filename"))
            mesh.set("filename", str(Path(mesh.get("filename")).with_suffix(".obj")))
    for joint in robot.iter("joint"):
        if joint.get("type") == "continuous":
            # mplib 0.1.1's OMPL planner refuses continuous joints; +-2 pi is more turning than any episode needs.
            joint.set("type", "revolute")
            ET.SubElement(joint, "limit", lower=f"{-2 * np.pi:.6f}", upper=f"{2 * np.pi:.6f}", effort="1000", velocity="3.14")
        for tag in joint.findall("safety_controller"):
            joint.remove(tag)
        limit = joint.find("limit")
        if limit is not None and "effort" not in limit.attrib:
            limit.set("effort", "1000")  # required by the URDF spec (urdfdom, used by mplib, rejects the file)
        dynamics = joint.find("dynamics")
        if dynamics is not None:
            for attr in ("D", "K", "mu_coulomb", "mu_viscous"):
                dynamics.attrib.pop(attr, None)

    # Meshes are written as OBJ: Drake's SceneGraph reads OBJ but not STL; SAPIEN and mplib read both.
    src_dir = src.parent
    for rel in sorted(meshes):
        mesh = trimesh.load(src_dir / rel, force="mesh")
        target = out / Path(rel).with_suffix(".obj")
        target.parent.mkdir(parents=True, exist_ok=True)
        mesh.export(target)
        # mplib (convex=True) looks for "<mesh>.convex.stl"; the Panda ships them, the Sciurus17 body does not.
        shipped_convex = (src_dir / rel).with_name(Path(rel).name + ".convex.stl")
        convex = target.with_name(target.name + ".convex.stl")
        if shipped_convex.is_file():
            shutil.copyfile(shipped_convex, convex)
        else:
            mesh.convex_hull.export(convex)
    ET.indent(tree)
    urdf_path = out / f"{name}.urdf"
    tree.write(urdf_path, encoding="utf-8", xml_declaration=True)
    _write_srdf(urdf_path, out / f"{name}.srdf", robot)


def _low_poly_visual(filename: str) -> str:
    """Map a visual mesh path to the low-poly collision mesh of the same part."""
    path = Path(filename)
    if path.parts[0] == "franka_description":  # visual/link1.dae -> collision/link1.stl
        return str(Path("franka_description/meshes/collision") / (path.stem + ".stl"))
    if path.parts[0] == "sciurus17_description":  # visual/Body.stl (123k triangles) -> collision/Body.stl
        return str(Path("sciurus17_description/meshes/collision") / path.name)
    return filename


def _adjacent_pairs(robot: ET.Element) -> set[tuple[str, str]]:
    """Link pairs joined by a joint (directly or through geometry-less links), and sibling links."""
    parent_of = {j.find("child").get("link"): j.find("parent").get("link") for j in robot.iter("joint")}
    has_geometry = {l.get("name"): l.find("collision") is not None for l in robot.iter("link")}

    def nearest_geometric_ancestor(link: str) -> str | None:
        p = parent_of.get(link)
        while p is not None and not has_geometry[p]:
            p = parent_of.get(p)
        return p

    pairs = set()
    for child in parent_of:
        if has_geometry.get(child):
            ancestor = nearest_geometric_ancestor(child)
            if ancestor is not None:
                pairs.add(tuple(sorted((child, ancestor))))
    # Siblings on one link: a hand's two fingers touch whenever the gripper closes on nothing, and the two
    # arms' first links are bolted to the same torso; neither contact is a collision to plan around.
    children: dict[str, list[str]] = {}
    for child in parent_of:
        if has_geometry.get(child):
            children.setdefault(nearest_geometric_ancestor(child), []).append(child)
    for siblings in children.values():
        pairs.update(tuple(sorted((a, b))) for i, a in enumerate(siblings) for b in siblings[i + 1:])
    return pairs


def _write_srdf(urdf_path: Path, srdf_path: Path, robot: ET.Element) -> None:
    pairs = {pair: "Adjacent" for pair in _adjacent_pairs(robot)}
    # Pairs that collide in almost every configuration (e.g. fingers against the hand they slide in).
    from mplib import pymp  # lazy: mplib, once per machine (the SRDF is cached)

    srdf_path.write_text(f'<robot name="{robot.get("name")}"/>')  # empty for now; silences "No SRDF file provided"
    model = pymp.ArticulatedModel(str(urdf_path), str(srdf_path), [0, 0, -9.81], [], [], convex=True, verbose=False)
    world = pymp.PlanningWorld([model], ["robot"], [], [])
    pin = model.get_pinocchio_model()
    rng = np.random.default_rng(0)
    lower, upper = (np.array(x) for x in zip(*[(l[0], l[1]) for l in np.concatenate(pin.get_joint_limits())]))
    lower, upper = np.clip(lower, -np.pi, None), np.clip(upper, None, np.pi)  # continuous yaw has no limits
    counts: dict[tuple[str, str], int] = {}
    for _ in range(_SRDF_SAMPLES):
        model.set_qpos(rng.uniform(lower, upper), True)
        for c in world.collide_full():
            pair = tuple(sorted((c.link_name1, c.link_name2)))
            counts[pair] = counts.get(pair, 0) + 1
    for pair, n in counts.items():
        if n >= _ALWAYS_COLLIDING_SHARE * _SRDF_SAMPLES:
            pairs.setdefault(pair, "Default")

    root = ET.Element("robot", name=robot.get("name"))
    for (a, b), reason in sorted(pairs.items()):
        ET.SubElement(root, "disable_collisions", link1=a, link2=b, reason=reason)
    tree = ET.ElementTree(root)
    ET.indent(tree)
    tree.write(srdf_path, encoding="utf-8", xml_declaration=True)
