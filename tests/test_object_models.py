"""Cabinets from disk (``handleit eval --object``): PartNet-Mobility layout, handles by its conventions, mesh
loading with convex decomposition, the episodes a folder makes, and a clear error for each bad input.

The models are generated cabinets exported as meshes (``cabinet_mesh_export``); door-test-002 has knobs and
lips only (no decomposition needed: fast), door-test-000 has U-shaped bar handles (CoACD decomposes them).
"""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest
import trimesh

import handleit.envs
from handleit.behaviors import make_tree_solver
from handleit.envs.cabinet_generator import cabinet_urdf, sample_cabinet
from handleit.envs.cabinet_mesh_export import export_mesh_cabinet
from handleit.envs.object_model_errors import (
    MeshLoadError,
    NoHandleError,
    ObjectFileNotFoundError,
    ObjectModelError,
    TargetLinkError,
    URDFError,
)
from handleit.envs.object_models import check_target_link, model_urdfs, openable_parts
from handleit.envs.urdf_meshes import loadable_urdf
from handleit.harness.cli import main as cli
from handleit.harness.evaluation import episode_specs, object_split
from handleit.harness.sim_robot import SimRobot
from tests.helpers import make_env

FAST_MODEL = "door-test-002"  # a drawer with a knob, three doors with knobs: every collision piece convex


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A folder of mesh-based cabinets, exported once per module."""
    root = tmp_path_factory.mktemp("exported")
    export_mesh_cabinet(FAST_MODEL, root / FAST_MODEL)
    return root


@pytest.fixture
def model(exported, tmp_path):
    """A copy of the fast mesh-based model that a test may break."""
    folder = tmp_path / "models" / "my_cabinet"
    shutil.copytree(exported / FAST_MODEL, folder)
    return folder / "mobility.urdf"


def _door_specs(path, **kwargs):
    return episode_specs("OpenCabinetDoor", object_split(path), 2, "idle", 5, **kwargs)


# ------------------------------------------------------------------------------------------------ bad input
def test_a_missing_path_is_named(tmp_path, capsys):
    with pytest.raises(ObjectFileNotFoundError, match=f"object path not found: {re.escape(str(tmp_path))}/gone"):
        _door_specs(tmp_path / "gone")
    assert cli(["eval", "--task", "OpenCabinetDoor", "--object", str(tmp_path / "gone"), "--out",
                str(tmp_path / "out")]) == 2
    assert "object path not found" in capsys.readouterr().err


def test_a_folder_without_models_says_what_it_expected(tmp_path):
    (tmp_path / "empty_model").mkdir()
    with pytest.raises(FileNotFoundError, match=r"no models in .*expected a mobility.urdf.*<id>/mobility.urdf"):
        model_urdfs(tmp_path)


def test_a_missing_mesh_is_named(model):
    (model.parent / "textured_objs" / "original-3.obj").unlink()
    with pytest.raises(ObjectFileNotFoundError, match="references a mesh that does not exist: .*original-3.obj"):
        loadable_urdf(model)
    with pytest.raises(ObjectFileNotFoundError, match="original-3.obj"):
        make_env("OpenCabinetDoor", urdf=model).reset(seed=0)


def test_a_urdf_that_does_not_parse(model):
    model.write_text(model.read_text()[:-40])
    with pytest.raises(URDFError, match=f"malformed URDF {re.escape(str(model))}"):
        _door_specs(model.parent.parent)


def test_a_malformed_semantics_line(model):
    (model.parent / "semantics.txt").write_text("link_0 slider\n")
    with pytest.raises(URDFError, match=r"semantics.txt, line 1: expected '<link name> <joint type> <semantic label>'"):
        _door_specs(model)


def test_a_target_link_that_is_neither_prismatic_nor_revolute(model, capsys):
    with pytest.raises(TargetLinkError, match=f"{re.escape(str(model))}: target link 'link_4' is neither prismatic "
                                              "nor revolute: its joint is fixed; a door needs a revolute joint"):
        _door_specs(model, target_link="link_4")
    with pytest.raises(TargetLinkError, match="target link 'link_0' is not a door: its joint is prismatic"):
        check_target_link(model, "door", "link_0")
    with pytest.raises(TargetLinkError, match="no link 'link_99'"):
        check_target_link(model, "door", "link_99")
    out = str(model.parent / "out")
    assert cli(["eval", "--task", "OpenCabinetDoor", "--object", str(model), "--target-link", "link_4", "--out",
                out]) == 2
    assert "neither prismatic nor revolute" in capsys.readouterr().err
    # The env says the same when asked directly.
    with pytest.raises(TargetLinkError, match="'link_4' .* is not a door: its joint is fixed.*neither prismatic"):
        make_env("OpenCabinetDoor", urdf=model, target_link="link_4").reset(seed=0)


def test_a_part_without_a_handle_names_the_convention(model):
    model.write_text(model.read_text().replace('name="handle-5"', 'name="grip-5"'))
    convention = r"looked for a <visual> of the link whose name contains 'handle' \(PartNet-Mobility names them " \
                 r"like 'handle-5'\), or a link labelled 'handle' in semantics.txt"
    with pytest.raises(NoHandleError, match=f"{re.escape(str(model))}: target link 'link_1' has no handle: {convention}"):
        _door_specs(model, target_link="link_1")
    # Without a target link the doors that have a handle are the targets.
    assert {s.target_link for s in _door_specs(model)} == {"link_2", "link_3"}
    text = model.read_text()
    for k in (7, 9):
        text = text.replace(f'name="handle-{k}"', f'name="grip-{k}"')
    model.write_text(text)
    with pytest.raises(NoHandleError, match=f"no door with a handle: .*{re.escape(str(model))}.*{convention}"):
        _door_specs(model)
    with pytest.raises(NoHandleError, match=f"'link_1' of 'my_cabinet' \\({re.escape(str(model))}\\) has no handle"):
        make_env("OpenCabinetDoor", urdf=model, target_link="link_1").reset(seed=0)


@pytest.mark.parametrize("content", [b"", b"\x00\x01garbage\xff" * 10, b"v nan 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n"])
def test_a_mesh_that_does_not_load_is_named(model, content):
    (model.parent / "textured_objs" / "original-3.obj").write_bytes(content)
    with pytest.raises(MeshLoadError, match=f"mesh does not load: {re.escape(str(model.parent))}.*original-3.obj"):
        loadable_urdf(model)


def test_every_error_is_an_object_model_error():
    for error in (MeshLoadError, NoHandleError, ObjectFileNotFoundError, TargetLinkError, URDFError):
        assert issubclass(error, ObjectModelError) and issubclass(error, ValueError)


# ------------------------------------------------------------------------------------------------ handles
def test_handles_by_visual_name_and_by_semantics_txt(model):
    parts = {p.link: p for p in openable_parts(model)}
    assert {p.kind for p in parts.values()} == {"drawer", "door"}
    assert parts["link_1"].handle_visuals == ("handle-5",) and parts["link_1"].label == "door"
    original_center = _handle_center(model, "link_1")

    # The handle as a link of its own, fixed to the door, labelled in semantics.txt; its visual is not named
    # "handle": semantics.txt alone says what it is.
    text = model.read_text()
    start, end = text.index('<visual name="handle-5">'), text.index("</collision>", text.index('<collision name="handle-5">'))
    handle_elements = text[start:end + len("</collision>")].replace("handle-5", "knob-5")
    text = text[:start] + text[end + len("</collision>"):]
    handle_link = (f'<link name="link_9"><inertial><mass value="0.05"/><inertia ixx="1e-5" ixy="0" ixz="0" '
                   f'iyy="1e-5" iyz="0" izz="1e-5"/></inertial>{handle_elements}</link>'
                   '<joint name="joint_9" type="fixed"><origin xyz="0 0 0" rpy="0 0 0"/><parent link="link_1"/>'
                   '<child link="link_9"/></joint></robot>')
    model.write_text(text.replace("</robot>", handle_link))
    assert openable_parts(model)[1].handle_visuals == ()
    with (model.parent / "semantics.txt").open("a") as f:
        f.write("link_9 static handle\n")
    part = next(p for p in openable_parts(model) if p.link == "link_1")
    assert part.handle_links == ("link_9",) and part.handle_visuals == ("knob-5",)
    assert np.allclose(_handle_center(model, "link_1"), original_center, atol=1e-4)


def _handle_center(urdf, link):
    env = make_env("OpenCabinetDoor", urdf=urdf, target_link=link)
    env.reset(seed=0)
    base = env.unwrapped
    assert len(base.target.handle_shape_ids) > 0
    assert set(base.target.handle_shape_ids) <= set(base.target.link_shape_ids)
    return base.handle_center_L


# ------------------------------------------------------------------------------------------------ episodes
def test_episodes_take_the_models_in_turn_and_each_models_targets_in_turn(exported, tmp_path):
    folder = tmp_path / "two"
    shutil.copytree(exported / FAST_MODEL, folder / "a")
    shutil.copytree(exported / FAST_MODEL, folder / "b")
    (folder / "b" / "mobility.urdf").write_text((folder / "b" / "mobility.urdf").read_text()
                                                .replace('name="handle-9"', 'name="grip-9"'))
    specs = episode_specs("OpenCabinetDoor", object_split(folder), 6, "bt", 200, seed=7)
    assert [(s.model_id, s.target_link) for s in specs] == [
        ("a", "link_1"), ("b", "link_1"), ("a", "link_2"), ("b", "link_2"), ("a", "link_3"), ("b", "link_1")]
    assert [s.seed for s in specs] == list(range(7, 13))
    drawers = episode_specs("OpenCabinetDrawer", object_split(folder), 2, "bt", 200)
    assert [s.target_link for s in drawers] == ["link_0", "link_0"]
    named = episode_specs("OpenCabinetDoor", object_split(folder), 2, "bt", 200, target_link="link_2")
    assert {s.target_link for s in named} == {"link_2"}


def test_eval_runs_on_a_folder_and_reports_it_as_a_column(exported, tmp_path, capsys):
    out = tmp_path / "out"
    assert cli(["eval", "--task", "OpenCabinetDoor", "--object", str(exported), "--episodes", "2", "--solver", "idle",
                "--max-steps", "3", "--workers", "1", "--out", str(out)]) == 0
    table = (out / "summary.md").read_text()
    assert f"idle (3 steps) object:{exported}" in table and "0.000 (0/2)" in table
    records = (out / "records.jsonl").read_text().splitlines()
    assert len(records) == 2 and '"target_link": "link_1"' in records[0] and '"target_link": "link_2"' in records[1]


# ------------------------------------------------------------------------------------------------ meshes
def test_exported_cabinet_loads_like_its_primitive_original(tmp_path):
    """Same parts, ranges and handle centres; the U-shaped bar handles are decomposed with the gap kept."""
    mesh_model = export_mesh_cabinet("door-test-000", tmp_path / "door-test-000")
    for link in ("link_0", "link_1"):
        mesh_env = make_env("OpenCabinetDoor", urdf=mesh_model, target_link=link)
        prim_env = make_env("OpenCabinetDoor", urdf=cabinet_urdf("door-test-000"), target_link=link)
        mesh_env.reset(seed=0)
        prim_env.reset(seed=0)
        m, p = mesh_env.unwrapped, prim_env.unwrapped
        assert m.target.q_range == pytest.approx(p.target.q_range)
        assert np.allclose(m.handle_center_L, p.handle_center_L, atol=1e-3)
        assert np.allclose(m.handle_center_W(), p.handle_center_W(), atol=1e-3)
        assert [len(l.collision_shapes) > 0 for l in m.cabinet.links] == [len(l.collision_shapes) > 0
                                                                          for l in p.cabinet.links]

    # The handle of link_0: CoACD's pieces leave the gap between bar and door open, and fill the bar.
    handle = sample_cabinet("door-test-000").parts[0].handle
    assert handle.profile == "box" and handle.shape.endswith("bar")
    prepared = loadable_urdf(mesh_model).parent
    pieces = [trimesh.load(p, force="mesh") for p in sorted((prepared / "collision").glob("*.obj"))]
    handle_pieces = [p for p in pieces if p.bounds[0][0] < -0.005]  # in front of the door panel (x < 0)
    assert len(handle_pieces) >= 6  # two handles of bar and two posts each
    gap = np.array([[-handle.standoff_m / 2, handle.center_y_m, handle.center_z_m]])
    bar = np.array([[-(handle.standoff_m + handle.thickness_m / 2), handle.center_y_m, handle.center_z_m]])
    assert not any(_inside_convex(p, gap) for p in handle_pieces)
    assert any(_inside_convex(p, bar) for p in handle_pieces)


def _inside_convex(piece: trimesh.Trimesh, point: np.ndarray) -> bool:
    """Whether ``point`` lies inside the convex piece: behind every face's plane."""
    return bool(np.all(np.einsum("ij,ij->i", point - piece.triangles[:, 0], piece.face_normals) <= 1e-9))


def _episode(urdf, task, link, seed, max_steps):
    robot = SimRobot(handleit.envs.make(task, obs_mode="pointcloud", urdf=urdf, max_episode_steps=max_steps))
    observation = robot.reset(seed=seed, options={"target_link": link})
    solver = make_tree_solver(task, robot.model)
    solver.reset(observation)
    while not robot.done:
        robot.act(solver.step(observation))
        observation = robot.observe()
    return robot.info["success"], robot.steps


@pytest.mark.parametrize("seed", [0, 1])
def test_the_drawer_tree_opens_the_mesh_cabinet_as_it_opens_the_original(tmp_path, seed):
    # drawer-test-008: horizontal bar handles of box profile, so the mesh copy's handles went through CoACD.
    mesh_model = export_mesh_cabinet("drawer-test-008", tmp_path / "drawer-test-008")
    mesh = _episode(mesh_model, "OpenCabinetDrawer", "link_1", seed, 400)
    original = _episode(cabinet_urdf("drawer-test-008"), "OpenCabinetDrawer", "link_1", seed, 400)
    assert mesh[0] and original[0], (mesh, original)
    assert abs(mesh[1] - original[1]) <= 60, (mesh, original)  # steps to success: within 0.6 s


def test_models_from_disk_are_for_the_cabinet_tasks_in_lockstep(exported):
    with pytest.raises(ValueError, match="models from disk .* are for OpenCabinetDrawer and OpenCabinetDoor, not PushChair"):
        episode_specs("PushChair", object_split(exported), 1, "bt", 200)
    with pytest.raises(ValueError, match="lockstep only"):
        episode_specs("OpenCabinetDoor", object_split(exported), 1, "bt", 200, perturb="latency=0.05,camera_hz=15")

