"""Colour markers and operator prompts of the bundled envs (envs/markers.py, envs/target_prompts.py).

The marker is painted on the target only and a plain HSV threshold on the rendered colours finds exactly its
pixels; the prompt is the target's visual bounding box at reset (plus noise from its own generator), fixed for
the episode; neither option changes an episode's physics or sampling. Ground truth is read here, never by a
solver."""

from __future__ import annotations

import numpy as np
import pytest
import sapien

import handleit.envs
from handleit.envs.markers import (
    AVOID_HUE_DEG,
    DEFAULT_MARKER_RGB,
    displayed_hsv,
    marker_pixel_mask,
    shape_materials,
)
from handleit.envs.pick_cube import CUBE_HALF_SIZE_M
from handleit.harness.sim_robot import SimRobot

# One model per task keeps asset generation short; chair-train-004 has an olive backrest, a hue near the
# marker's that the env must turn away.
MODELS = {
    "OpenCabinetDrawer": "drawer-train-000",
    "OpenCabinetDoor": "door-train-000",
    "PushChair": "chair-train-004",
    "MoveBucket": "bucket-train-000",
    "PickCube": "cube",
    "PickObject": "object-train-000",
}
TASKS = list(MODELS)
SMALL_CAMERAS = {"mobile": dict(camera_width=200, camera_height=80),
                 "tabletop": dict(camera_width=96, camera_height=96)}
NOISE_M = 0.02


def make(task, **kwargs):
    kwargs.setdefault("obs_mode", "state")
    if kwargs["obs_mode"] != "state":
        for k, v in SMALL_CAMERAS["tabletop" if task.startswith("Pick") else "mobile"].items():
            kwargs.setdefault(k, v)
    return handleit.envs.make(task, model_ids=[MODELS[task]], **kwargs)


def _target_mask_name(task):
    return "target_handle" if task.startswith("OpenCabinet") else "target_link"


def _render_body(entity):
    return entity.find_component_by_type(sapien.render.RenderBodyComponent)


# ------------------------------------------------------------------------------------------------------------
# Marker
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("task", TASKS)
def test_marker_is_found_by_hsv_threshold_on_the_target_only(task):
    env = make(task, obs_mode="pointcloud", target_marker_rgb=DEFAULT_MARKER_RGB)
    base = env.unwrapped
    found_total = 0
    for seed in (0, 1):
        obs, _ = env.reset(seed=seed)
        pc = obs["pointcloud"]
        found = marker_pixel_mask(pc["rgb"]) & pc["valid"]
        # In the point cloud: every marker-coloured point lies on the target (its handle for cabinets).
        assert not (found & ~pc[_target_mask_name(task)]).any()
        found_total += int(found.sum())

        # Per pixel, against the render-shape ids: the threshold finds the marker's pixels and nothing else.
        base.scene.update_render()
        truth_px = found_px = both_px = 0
        for image in base.cameras.capture():
            truth = np.isin(image["shape_id"], list(base._marker_ids))
            hsv = marker_pixel_mask(image["rgb"])
            truth_px, found_px, both_px = truth_px + truth.sum(), found_px + hsv.sum(), both_px + (truth & hsv).sum()
        assert found_px == both_px, f"{task} seed {seed}: {found_px - both_px} pixels off the marker pass"
        assert both_px >= 0.95 * truth_px
    assert found_total >= 3, f"{task}: the cameras saw almost no marker"
    env.close()


@pytest.mark.parametrize("task", ["OpenCabinetDrawer", "OpenCabinetDoor"])
def test_cabinet_marker_is_on_the_target_handle_not_the_others(task):
    env = make(task, obs_mode="pointcloud", target_marker_rgb=DEFAULT_MARKER_RGB,
                camera_width=400, camera_height=160)
    base = env.unwrapped
    marker_hue = displayed_hsv(DEFAULT_MARKER_RGB)[0]
    other_handle_px = 0
    for seed in (0, 3):
        env.reset(seed=seed)
        assert base._marker_ids == set(base.target.handle_shape_ids.tolist())
        others = []
        for link in base.cabinet.links:
            body = _render_body(link.entity)
            for shape in body.render_shapes if body is not None else []:
                if "handle" in shape.name and shape.per_scene_id not in base._marker_ids:
                    others.append(shape.per_scene_id)
                    for material in shape_materials(shape):
                        h, s, _ = displayed_hsv(material.base_color)
                        assert s < 0.15 or min(abs(h - marker_hue), 360 - abs(h - marker_hue)) >= AVOID_HUE_DEG
        assert others, "the cabinet should have handles besides the target's"
        base.scene.update_render()
        for image in base.cameras.capture():
            other = np.isin(image["shape_id"], others)
            other_handle_px += int(other.sum())
            assert not (marker_pixel_mask(image["rgb"]) & other).any()
    assert other_handle_px > 0, "the other handles should be in view for this test to mean something"
    env.close()


def test_marker_turns_nearby_scene_hues_away_only_when_set():
    # chair-train-004's backrest is olive, 23 degrees of displayed hue from the default marker.
    plain, marked = make("PushChair"), make("PushChair", target_marker_rgb=DEFAULT_MARKER_RGB)
    plain.reset(seed=0)
    marked.reset(seed=0)

    def backrest_rgb(env):
        body = _render_body(env.unwrapped.seat_link.entity)
        shape = next(s for s in body.render_shapes if s.name == "backrest_panel")
        return np.asarray(shape_materials(shape)[0].base_color[:3])

    spec_rgb = np.asarray(plain.unwrapped.chair_spec.backrest_rgba[:3])
    np.testing.assert_allclose(backrest_rgb(plain), spec_rgb, atol=1e-6)  # no marker: the generator's colour
    marker_hue = displayed_hsv(DEFAULT_MARKER_RGB)[0]
    assert abs(displayed_hsv(spec_rgb)[0] - marker_hue) < AVOID_HUE_DEG
    h, s, v = displayed_hsv(backrest_rgb(marked))
    assert abs(h - marker_hue) >= AVOID_HUE_DEG
    _, spec_s, spec_v = displayed_hsv(spec_rgb)
    assert s == pytest.approx(spec_s, abs=1e-3) and v == pytest.approx(spec_v, abs=1e-3)


def test_marker_and_prompt_options_reject_bad_values():
    with pytest.raises(ValueError, match="target_marker_rgb"):
        make("PickCube", target_marker_rgb=(2.0, 0.0, 0.0))
    with pytest.raises(ValueError, match="target_marker_rgb"):
        make("PickCube", target_marker_rgb=(0.5, 0.5))
    with pytest.raises(ValueError, match="too grey or dark"):
        make("PickCube", target_marker_rgb=(0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="prompt_noise_m"):
        make("PickCube", prompt_noise_m=-0.01)
    with pytest.raises(ValueError, match="prompt_noise_m"):
        make("PickCube", prompt_noise_m=float("nan"))


# ------------------------------------------------------------------------------------------------------------
# Prompt
# ------------------------------------------------------------------------------------------------------------
def _true_bounds(task, base) -> np.ndarray:
    """The prompt's ground truth, from the simulator, at the time of the call."""
    if task.startswith("OpenCabinet"):
        entities = [base.target.link.entity]
    elif task == "PushChair":
        entities = [link.entity for link in base.chair.links]
    elif task == "MoveBucket":
        entities = [link.entity for link in base.bucket.links]
    else:
        entities = [base.obj]
    lo, hi = [], []
    for entity in entities:
        body = _render_body(entity)
        if body is not None and len(body.render_shapes):
            box = body.compute_global_aabb_tight()
            lo.append(box[0])
            hi.append(box[1])
    return np.stack([np.min(lo, axis=0), np.max(hi, axis=0)])


@pytest.mark.parametrize("task", TASKS)
def test_prompt_is_the_targets_box_plus_noise_fixed_for_the_episode(task):
    exact, noisy = make(task, prompt_noise_m=0.0), make(task, prompt_noise_m=NOISE_M)
    assert {"target_prompt_point", "target_prompt_box"} <= set(noisy.observation_space["extra"].spaces)
    for seed in (0, 1):
        obs0, _ = exact.reset(seed=seed)
        obs, _ = noisy.reset(seed=seed)
        assert noisy.observation_space["extra"].contains(obs["extra"])
        box0, point0 = obs0["extra"]["target_prompt_box"], obs0["extra"]["target_prompt_point"]
        # Without noise: the target's visual box at reset (SAPIEN's own bounds of the render bodies).
        np.testing.assert_allclose(box0, _true_bounds(task, exact.unwrapped), atol=2e-3)
        np.testing.assert_allclose(point0, box0.mean(axis=0), atol=1e-6)
        # With noise: within about 3 std of the truth, and not the truth.
        point, box = obs["extra"]["target_prompt_point"], obs["extra"]["target_prompt_box"]
        assert np.all(np.abs(point - point0) <= 4 * NOISE_M) and np.all(np.abs(box - box0) <= 4 * NOISE_M)
        assert not np.allclose(point, point0) and np.all(box[0] <= box[1])
        # Fixed for the episode, though the robot moves.
        action = np.full(noisy.action_space.shape, 0.5, dtype=np.float32)
        for _ in range(3):
            later, *_ = noisy.step(action)
        np.testing.assert_array_equal(later["extra"]["target_prompt_point"], point)
        np.testing.assert_array_equal(later["extra"]["target_prompt_box"], box)


def test_prompt_contains_the_targets_known_points():
    env = make("OpenCabinetDrawer", prompt_noise_m=0.0)
    for seed in range(3):
        obs, _ = env.reset(seed=seed)
        lo, hi = obs["extra"]["target_prompt_box"]
        handle_W = env.unwrapped.handle_center_W()
        assert np.all(lo - 1e-4 <= handle_W) and np.all(handle_W <= hi + 1e-4)
    cube = make("PickCube", prompt_noise_m=0.0)
    obs, _ = cube.reset(seed=5)
    np.testing.assert_allclose(obs["extra"]["target_prompt_point"], cube.unwrapped.object_com_W(), atol=1e-5)
    extent = np.diff(obs["extra"]["target_prompt_box"], axis=0)[0]
    # The cube turned by a yaw about z: its box is 4 cm high, 4 to 5.7 cm wide.
    assert extent[2] == pytest.approx(2 * CUBE_HALF_SIZE_M, abs=1e-5)
    assert np.all(extent[:2] >= 2 * CUBE_HALF_SIZE_M - 1e-5)
    assert np.all(extent[:2] <= 2 * np.sqrt(2) * CUBE_HALF_SIZE_M + 1e-5)


def test_same_seed_same_prompt_and_a_new_seed_a_new_one():
    a, b = make("PickCube"), make("PickCube")
    first = a.reset(seed=7)[0]["extra"]["target_prompt_point"]
    np.testing.assert_array_equal(b.reset(seed=7)[0]["extra"]["target_prompt_point"], first)
    np.testing.assert_array_equal(a.reset(seed=7)[0]["extra"]["target_prompt_point"], first)
    noise_7 = first - a.unwrapped.object_com_W()
    noise_8 = a.reset(seed=8)[0]["extra"]["target_prompt_point"] - a.unwrapped.object_com_W()
    assert not np.allclose(noise_7, noise_8, atol=1e-6)


# ------------------------------------------------------------------------------------------------------------
# Physics and sampling are the same with and without the options
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("task", TASKS)
def test_options_leave_physics_and_sampling_unchanged(task):
    plain = make(task)
    marked = make(task, target_marker_rgb=DEFAULT_MARKER_RGB, prompt_noise_m=0.05)
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (4, *plain.action_space.shape)).astype(np.float32)
    obs_a, _ = plain.reset(seed=3)
    obs_b, _ = marked.reset(seed=3)
    assert plain.unwrapped.np_random.bit_generator.state == marked.unwrapped.np_random.bit_generator.state
    np.testing.assert_array_equal(obs_a["state"], obs_b["state"])
    for action in actions:
        obs_a, *_ = plain.step(action)
        obs_b, *_ = marked.step(action)
        np.testing.assert_array_equal(obs_a["state"], obs_b["state"])  # qpos, qvel, poses, object state


# ------------------------------------------------------------------------------------------------------------
# SimRobot
# ------------------------------------------------------------------------------------------------------------
def test_sim_robot_passes_the_chosen_prompt():
    env = make("PickCube", obs_mode="pointcloud")
    obs, _ = env.reset(seed=2)
    box = obs["extra"]["target_prompt_box"]
    point = obs["extra"]["target_prompt_point"]
    robot = SimRobot(env)  # default: the box
    np.testing.assert_allclose(robot.reset(seed=2).target_prompt_W, box)
    assert robot.observe().target_prompt_W.shape == (2, 3)
    np.testing.assert_allclose(SimRobot(env, prompt="point").reset(seed=2).target_prompt_W, point)
    assert SimRobot(env, prompt="none").reset(seed=2).target_prompt_W is None
    with pytest.raises(ValueError, match="unknown prompt"):
        SimRobot(env, prompt="click")
