"""Tests of the procedural cabinets: ids and determinism, coverage of each split, and that every cabinet
loads in SAPIEN and moves over its joint ranges without exploding."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np
import pytest
import sapien

from handleit.envs.articulated_object import load_articulated_object
from handleit.envs.cabinet_generator import (
    HANDLE_SHAPES,
    SPLIT_COUNTS,
    cabinet_ids,
    cabinet_urdf,
    sample_cabinet,
    write_cabinet,
)
from handleit.envs.render_setup import new_scene

SPLITS = [(kind, split) for kind in SPLIT_COUNTS for split in SPLIT_COUNTS[kind]]
ALL_IDS = [model_id for kind, split in SPLITS for model_id in cabinet_ids(kind, split)]
TIMESTEP_S = 1 / 500
RANGE_TOLERANCE = 0.02  # share of the joint range
DRIVE_NATURAL_FREQUENCY_RAD_S = 80.0  # stiff enough to beat joint friction (coefficient up to 0.15) within 2%
MAX_PHASE_S = 1.0


@dataclass
class LoadedCabinet:
    scene: sapien.Scene
    art: sapien.physx.PhysxArticulation
    meta: dict
    urdf: ET.Element

    def link(self, name: str) -> sapien.physx.PhysxArticulationLinkComponent:
        return next(link for link in self.art.links if link.name == name)

    def body(self) -> sapien.physx.PhysxArticulationLinkComponent:
        return self.link(f"link_{len(self.meta['parts'])}")

    def joint_xml(self, name: str) -> ET.Element:
        return next(j for j in self.urdf.iter("joint") if j.get("name") == name)


def load_cabinet(model_id: str) -> LoadedCabinet:
    """Load a cabinet the way the env does: fixed root, no collisions between the cabinet's own links."""
    path = cabinet_urdf(model_id)
    scene = new_scene()
    scene.set_timestep(TIMESTEP_S)
    scene.add_ground(0)
    art = load_articulated_object(scene, path)
    # Link poses are only computed by a step or a set_qpos; start from the closed cabinet.
    art.set_qpos(np.zeros(art.dof, dtype=np.float32))
    meta = json.loads((path.parent / "meta.json").read_text())
    return LoadedCabinet(scene, art, meta, ET.parse(path).getroot())


def render_shapes(link) -> list:
    return link.entity.find_component_by_type(sapien.render.RenderBodyComponent).render_shapes


def shape_center_W(link, shape) -> np.ndarray:
    return (link.entity_pose * shape.local_pose).p


def handle_center_W(link) -> np.ndarray:
    return np.mean([shape_center_W(link, s) for s in render_shapes(link) if "handle" in s.name], axis=0)


def box_corners_W(link, shape) -> np.ndarray:
    """The 8 corners of a box render shape, in the world frame."""
    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
    X_WS = (link.entity_pose * shape.local_pose).to_transformation_matrix()
    return (signs * shape.half_size) @ X_WS[:3, :3].T + X_WS[:3, 3]


def expected_X_BL(cabinet: LoadedCabinet, joint_name: str, q: float, X_BL0: np.ndarray) -> np.ndarray:
    """Pose of a part in the body frame at joint value q, from its pose at q = 0 and the URDF joint."""
    joint = cabinet.joint_xml(joint_name)
    axis = np.array([float(v) for v in joint.find("axis").get("xyz").split()])
    origin = np.array([float(v) for v in joint.find("origin").get("xyz").split()])
    motion = np.eye(4)
    if joint.get("type") == "prismatic":
        motion[:3, 3] = q * axis
    else:
        # Rotation by q about `axis` through the joint origin (the body frame is the URDF root frame).
        k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
        rot = np.eye(3) + math.sin(q) * k + (1 - math.cos(q)) * k @ k
        motion[:3, :3] = rot
        motion[:3, 3] = origin - rot @ origin
    return motion @ X_BL0


def X_BL(cabinet: LoadedCabinet, link) -> np.ndarray:
    return (cabinet.body().entity_pose.inv() * link.entity_pose).to_transformation_matrix()


# ---------------------------------------------------------------------------------------------- ids


def test_ids_match_split_counts_and_are_disjoint():
    for kind, split in SPLITS:
        ids = cabinet_ids(kind, split)
        assert len(ids) == SPLIT_COUNTS[kind][split]
        assert len(set(ids)) == len(ids)
    assert len(set(ALL_IDS)) == len(ALL_IDS)
    for kind in SPLIT_COUNTS:
        assert not set(cabinet_ids(kind, "train")) & set(cabinet_ids(kind, "test"))
    assert cabinet_ids("drawer", "train")[7] == "drawer-train-007"


def test_bad_kind_or_split_names_valid_choices():
    with pytest.raises(ValueError, match="drawer") as info:
        cabinet_ids("fridge", "train")
    assert "door" in str(info.value)
    with pytest.raises(ValueError, match="train") as info:
        cabinet_ids("door", "val")
    assert "test" in str(info.value)


BAD_IDS = ["drawer-train", "door-train-7", "chair-test-001", "drawer-test-010", ""]


@pytest.mark.parametrize("model_id", BAD_IDS)
def test_malformed_id_raises(model_id):
    with pytest.raises(ValueError):
        sample_cabinet(model_id)


def test_sampling_is_deterministic(tmp_path):
    for model_id in ["drawer-train-000", "door-test-009"]:
        spec = sample_cabinet(model_id)
        assert sample_cabinet(model_id) == spec
        first = write_cabinet(spec, tmp_path / "a" / model_id)
        second = write_cabinet(sample_cabinet(model_id), tmp_path / "b" / model_id)
        for name in ["mobility.urdf", "semantics.txt", "meta.json"]:
            assert (first.parent / name).read_bytes() == (second.parent / name).read_bytes()
    assert sample_cabinet("drawer-train-000") != sample_cabinet("drawer-train-001")


def test_cabinet_urdf_is_cached():
    path = cabinet_urdf("door-train-000")
    assert path.name == "mobility.urdf" and path.is_file()
    assert {p.name for p in path.parent.iterdir()} == {"mobility.urdf", "semantics.txt", "meta.json"}
    mtime = path.stat().st_mtime_ns
    assert cabinet_urdf("door-train-000") == path and path.stat().st_mtime_ns == mtime


# ---------------------------------------------------------------------------------------------- splits


@pytest.mark.parametrize("kind,split", SPLITS)
def test_split_covers_shapes_hinges_and_layouts(kind, split):
    specs = [sample_cabinet(model_id) for model_id in cabinet_ids(kind, split)]
    assert {p.handle.shape for s in specs for p in s.parts} == set(HANDLE_SHAPES)
    # The task's own part kind alone shows every shape, so every shape can be a target.
    assert {p.handle.shape for s in specs for p in s.parts if p.kind == kind} == set(HANDLE_SHAPES)
    assert len({s.layout for s in specs}) > 1
    for spec in specs:
        assert spec.kind == kind and spec.split == split
        assert any(p.kind == kind for p in spec.parts), spec.model_id
    if kind == "door":
        assert {p.hinge for s in specs for p in s.parts if p.kind == "door"} == {"left", "right"}


@pytest.mark.parametrize("model_id", ALL_IDS)
def test_urdf_structure(model_id):
    path = cabinet_urdf(model_id)
    root = ET.parse(path).getroot()
    spec = sample_cabinet(model_id)
    body = f"link_{len(spec.parts)}"
    links = {link.get("name"): link for link in root.iter("link")}
    assert set(links) == {"base", body} | {f"link_{i}" for i in range(len(spec.parts))}
    assert not list(links["base"])  # no geometry on the root
    joints = {j.get("name"): j for j in root.iter("joint")}
    assert joints[f"joint_{len(spec.parts)}"].get("type") == "fixed"
    for i, part in enumerate(spec.parts):
        joint = joints[f"joint_{i}"]
        assert joint.find("parent").get("link") == body and joint.find("child").get("link") == f"link_{i}"
        assert joint.get("type") == ("prismatic" if part.kind == "drawer" else "revolute")
        limit = joint.find("limit")
        assert float(limit.get("lower")) == 0 and float(limit.get("upper")) > 0
        assert {"effort", "velocity"} <= set(limit.keys())
        assert {"damping", "friction"} <= set(joint.find("dynamics").keys())
        if part.kind == "drawer":
            assert joint.find("axis").get("xyz") == "-1 0 0"
            assert 0.6 <= part.travel_m / (part.front_thickness_m + part.box_depth_m) <= 0.9
        else:
            assert 80 <= math.degrees(part.open_rad) <= 120
    for name, link in links.items():
        visuals, collisions = link.findall("visual"), link.findall("collision")
        if name != "base":
            assert float(link.find("inertial/mass").get("value")) > 0
        assert [_geometry_key(v) for v in visuals] == [_geometry_key(c) for c in collisions]
        for visual in visuals:
            assert visual.get("name")
            assert visual.find("geometry")[0].tag in {"box", "cylinder", "sphere"}
        # The env finds handles by visual name, as ManiSkill does on PartNet-Mobility.
        handle_names = [v.get("name") for v in visuals if "handle" in v.get("name")]
        assert bool(handle_names) == (name not in ("base", body)), name
    semantics = (path.parent / "semantics.txt").read_text().splitlines()
    assert f"{body} static cabinet_body" in semantics
    assert len(semantics) == len(spec.parts) + 1
    meta = json.loads((path.parent / "meta.json").read_text())
    assert meta["model_id"] == model_id and meta["seed"] == spec.seed


def _geometry_key(element: ET.Element) -> tuple:
    shape = element.find("geometry")[0]
    return element.get("name"), shape.tag, dict(shape.attrib), dict(element.find("origin").attrib)


@pytest.mark.parametrize("model_id", ALL_IDS)
def test_handles_fit_the_gripper_and_their_panel(model_id):
    for part in sample_cabinet(model_id).parts:
        h = part.handle
        if h.shape in ("horizontal_bar", "vertical_bar"):
            assert 0.01 <= h.thickness_m <= 0.025 and 0.08 <= h.length_m <= 0.35
            assert 0.025 <= h.standoff_m <= 0.05
            extent_y, extent_z = (h.length_m, h.thickness_m) if h.axis == "y" else (h.thickness_m, h.length_m)
        elif h.shape == "knob":
            assert 0.025 <= h.head_diameter_m <= 0.045 and 0.025 <= h.standoff_m <= 0.045
            extent_y = extent_z = h.head_diameter_m
        else:
            assert 0.012 <= h.thickness_m <= 0.02 and 0.025 <= h.standoff_m <= 0.045
            extent_y, extent_z = (h.length_m, h.thickness_m) if h.axis == "y" else (h.thickness_m, h.length_m)
        # Footprint inside the front (door frames sit on the hinge edge, drawer frames at the center).
        w = part.front_width_m
        y_low = -w / 2 if part.kind == "drawer" else (-w if part.hinge == "left" else 0)
        assert y_low - 1e-6 <= h.center_y_m - extent_y / 2 and h.center_y_m + extent_y / 2 <= y_low + w + 1e-6
        assert abs(h.center_z_m) + extent_z / 2 <= part.front_height_m / 2 + 1e-6
        if part.kind == "drawer" and h.shape != "vertical_bar":
            assert h.center_y_m == 0 and h.center_z_m >= 0  # centered, upper half


# ---------------------------------------------------------------------------------------------- SAPIEN


@pytest.mark.parametrize("model_id", ALL_IDS)
def test_open_parts_move_the_right_way(model_id):
    """Kinematic check of directions: doors swing out past the front face, drawers slide toward -x."""
    cabinet = load_cabinet(model_id)
    front_x = -cabinet.meta["depth_m"] / 2
    parts = cabinet.meta["parts"]
    joints = cabinet.art.active_joints
    closed = {j.name: handle_center_W(j.child_link) for j in joints}
    for joint in joints:
        # Closed fronts are flush with the body's front face.
        front = next(s for s in render_shapes(joint.child_link) if s.name in ("drawer_front", "door_panel"))
        assert box_corners_W(joint.child_link, front)[:, 0].min() == pytest.approx(front_x, abs=1e-4)
    cabinet.art.set_qpos(np.array([j.limits[0, 1] for j in joints], dtype=np.float32))
    for joint in joints:
        part = parts[int(joint.name.split("_")[1])]
        link = joint.child_link
        assert any("handle" in s.name for s in render_shapes(link)), joint.name
        moved = handle_center_W(link) - closed[joint.name]
        if part["kind"] == "drawer":
            np.testing.assert_allclose(moved, [-part["travel_m"], 0, 0], atol=1e-4)
        else:
            panel = next(s for s in render_shapes(link) if s.name == "door_panel")
            # At >= 80 degrees the free edge is almost a door width in front of the face.
            assert box_corners_W(link, panel)[:, 0].min() < front_x - 0.7 * part["front_width_m"], joint.name
            assert moved[0] < -0.3 * part["front_width_m"]


@pytest.mark.parametrize("model_id", ALL_IDS)
def test_joints_reach_their_limits_when_driven(model_id):
    cabinet = load_cabinet(model_id)
    art, scene = cabinet.art, cabinet.scene
    joints = art.active_joints
    assert joints and all(any("handle" in s.name for s in render_shapes(j.child_link)) for j in joints)
    X_BL0 = {j.name: X_BL(cabinet, j.child_link) for j in joints}
    lower, upper = art.qlimits[:, 0], art.qlimits[:, 1]
    for joint in joints:
        inertia = _inertia_along_joint(joint)
        w = DRIVE_NATURAL_FREQUENCY_RAD_S
        joint.set_drive_properties(inertia * w * w, 2 * inertia * w, 1e4)

    for targets in (upper, lower):
        for joint, target in zip(joints, targets):
            joint.set_drive_target(float(target))
        for _ in range(int(MAX_PHASE_S / TIMESTEP_S) // 25):
            for _ in range(25):
                scene.step()
            qpos = art.qpos
            assert np.all(np.isfinite(qpos))
            if np.all(np.abs(qpos - targets) <= RANGE_TOLERANCE * (upper - lower)):
                break
        np.testing.assert_array_less(np.abs(qpos - targets), RANGE_TOLERANCE * (upper - lower))
        for joint, q in zip(joints, qpos):
            # Still attached: the part's pose relative to the body follows from the joint value.
            actual = X_BL(cabinet, joint.child_link)
            expected = expected_X_BL(cabinet, joint.name, float(q), X_BL0[joint.name])
            np.testing.assert_allclose(actual, expected, atol=1e-3, err_msg=joint.name)


def _inertia_along_joint(joint) -> float:
    """Mass (prismatic) or moment of inertia about the hinge line (revolute) that the joint's drive moves."""
    link = joint.child_link
    if joint.type == "prismatic":
        return link.mass
    X_WC = link.entity_pose * link.cmass_local_pose
    R_WC = X_WC.to_transformation_matrix()[:3, :3]
    inertia_W = R_WC @ np.diag(link.inertia) @ R_WC.T
    X_WJ = joint.global_pose.to_transformation_matrix()
    axis_W, point_W = X_WJ[:3, 0], X_WJ[:3, 3]  # PhysX joints move along / about their x axis
    r = X_WC.p - point_W
    return float(axis_W @ inertia_W @ axis_W + link.mass * (r @ r - (r @ axis_W) ** 2))
