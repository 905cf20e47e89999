"""The generated mobile Panda URDF/SRDF: read by SAPIEN, mplib and Drake, as the ManiSkill1 robots."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from handleit.envs.mobile_panda import MobilePanda
from handleit.envs.render_setup import new_scene
from handleit.envs.robot_description import mobile_panda

DOF = {"single": 13, "dual": 22}


@pytest.mark.parametrize("arms", ["single", "dual"])
def test_sapien_loads_the_robot_with_the_challenge_dofs(arms):
    description = mobile_panda(arms)
    robot = MobilePanda(new_scene(), description)
    assert robot.dof == DOF[arms] == len(robot.joint_names)
    assert robot.joint_names[:4] == description.base_joint_names
    groups = [robot.base_index] + [robot.arm_index[s] for s in robot.sides] + [robot.finger_index[s] for s in robot.sides]
    assert sorted(np.concatenate(groups)) == list(range(robot.dof)), "every joint in exactly one group"
    for side in robot.sides:
        assert [robot.joint_names[i] for i in robot.arm_index[side]] == list(description.arm_joint_names(side))
    assert all(link.disable_gravity for link in robot.articulation.links)
    for side in description.sides:
        assert description.tcp_link_name(side) in robot.links


@pytest.mark.parametrize("arms", ["single", "dual"])
def test_mplib_plans_with_the_urdf_and_srdf(arms):
    import mplib

    description = mobile_panda(arms)
    planner = mplib.Planner(
        urdf=str(description.urdf_path), srdf=str(description.srdf_path), move_group=description.tcp_link_name("right")
    )
    assert len(planner.user_joint_names) == DOF[arms]
    robot = MobilePanda(new_scene(), description)
    rest = robot.rest_qpos()
    # mplib orders joints depth-first, SAPIEN breadth-first: map by name.
    rest_mplib = np.array([rest[robot.joint_names.index(n)] for n in planner.user_joint_names])
    assert not planner.check_for_self_collision(planner.robot, rest_mplib), "rest pose must be collision-free"
    # The SRDF does not switch everything off: random arm configurations do collide sometimes.
    rng = np.random.default_rng(0)
    lower, upper = planner.joint_limits[:, 0], planner.joint_limits[:, 1]
    colliding = sum(bool(planner.check_for_self_collision(planner.robot, rng.uniform(lower, upper))) for _ in range(200))
    assert 2 <= colliding <= 150


@pytest.mark.parametrize("arms", ["single", "dual"])
def test_drake_parses_the_urdf_with_geometry(arms):
    from pydrake.all import AddMultibodyPlantSceneGraph, DiagramBuilder, Parser

    description = mobile_panda(arms)
    builder = DiagramBuilder()
    plant, scene_graph = AddMultibodyPlantSceneGraph(builder, 0.0)
    (model,) = Parser(plant).AddModels(str(description.urdf_path))
    plant.WeldFrames(plant.world_frame(), plant.GetFrameByName("root", model))
    plant.Finalize()
    assert plant.num_positions() == DOF[arms]
    assert scene_graph.model_inspector().num_geometries() > 10


def test_srdf_disables_adjacent_pairs_only_where_links_touch():
    description = mobile_panda("single")
    pairs = {(e.get("link1"), e.get("link2")) for e in ET.parse(description.srdf_path).getroot()}
    assert ("right_panda_link1", "right_panda_link2") in pairs
    assert ("right_panda_hand", "right_panda_leftfinger") in pairs
    assert ("right_panda_leftfinger", "right_panda_rightfinger") in pairs  # they touch when closed on nothing
    # The hand and the forearm do collide in some configurations: they must stay checked.
    assert ("right_panda_hand", "right_panda_link5") not in pairs


def test_visual_meshes_are_low_poly():
    """Software rendering cost follows triangle count: the visual meshes are the collision meshes."""
    import trimesh

    description = mobile_panda("single")
    root = ET.parse(description.urdf_path).getroot()
    faces = []
    for visual in root.iter("visual"):
        mesh = visual.find("geometry/mesh")
        if mesh is not None:
            faces.append(len(trimesh.load(description.urdf_path.parent / mesh.get("filename"), force="mesh").faces))
    assert faces and max(faces) < 10_000 and np.sum(faces) < 20_000
