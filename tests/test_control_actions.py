"""Joint velocities to the env's normalized action and back; gripper commands; world/base velocity frames.

The env's side is written out here from Let's Handle It (arXiv 2202.11792) footnote 2 and envs/controllers.py's
docstring (no env is built): velocity = (upper - lower) / 2 * clip(a, -1, 1) + (upper + lower) / 2, and the base's x/y
action is ego-centric, turned into the world by the base yaw.
"""

from __future__ import annotations

import numpy as np
import pytest

from handleit.control.actions import (
    OPENING_TIME_CONSTANT_S,
    base_to_world_velocity,
    denormalize_velocity,
    gripper_velocity,
    normalize_velocity,
    saturated_velocity,
    world_to_base_velocity,
)

LOWER = np.array([-1.0, -3.14, -0.5, 0.0])  # the last one asymmetric, to catch a dropped offset
UPPER = np.array([1.0, 3.14, 0.5, 0.2])


def env_velocity(action, lower, upper):
    """The env's mapping (Let's Handle It footnote 2), clipping included."""
    a = np.clip(action, -1, 1)
    return (upper - lower) / 2 * a + (upper + lower) / 2


def env_base_world_velocity(action_xy, yaw, limit_mps=1.0):
    """The env's base: ego-centric normalized x/y to a world velocity (envs/controllers.py JointVelocity)."""
    vx, vy = limit_mps * np.asarray(action_xy)
    c, s = np.cos(yaw), np.sin(yaw)
    return np.array([c * vx - s * vy, s * vx + c * vy])


def test_round_trip_within_limits():
    rng = np.random.default_rng(0)
    for _ in range(20):
        qvel = rng.uniform(LOWER, UPPER)
        a = normalize_velocity(qvel, LOWER, UPPER)
        assert np.all(np.abs(a) <= 1)
        np.testing.assert_allclose(env_velocity(a, LOWER, UPPER), qvel, atol=1e-12)
        np.testing.assert_allclose(denormalize_velocity(a, LOWER, UPPER), qvel, atol=1e-12)
        np.testing.assert_allclose(normalize_velocity(denormalize_velocity(a, LOWER, UPPER), LOWER, UPPER), a,
                                   atol=1e-12)


def test_known_values():
    np.testing.assert_allclose(normalize_velocity([0.5, -3.14, 0.0, 0.1], LOWER, UPPER), [0.5, -1.0, 0.0, 0.0])
    np.testing.assert_allclose(normalize_velocity([0.0, 0.0, 0.0, 0.0], LOWER, UPPER), [0, 0, 0, -1.0])
    assert normalize_velocity(1.57, -3.14, 3.14) == pytest.approx(0.5)  # scalars work too


def test_out_of_range_is_clipped():
    a = normalize_velocity([5.0, -10.0, 0.25, -1.0], LOWER, UPPER)
    np.testing.assert_allclose(a, [1.0, -1.0, 0.5, -1.0])
    # The inverse clips the action as the env does.
    np.testing.assert_allclose(denormalize_velocity([2.0, -3.0, 0.5, 1.5], LOWER, UPPER),
                               env_velocity([2.0, -3.0, 0.5, 1.5], LOWER, UPPER))
    np.testing.assert_allclose(denormalize_velocity([2.0, -3.0, 0.5, 1.5], LOWER, UPPER), [1.0, -3.14, 0.25, 0.2])


def test_gripper_velocity():
    np.testing.assert_array_equal(gripper_velocity("open", 0.2), [0.2, 0.2])  # +q opens each Panda finger
    np.testing.assert_array_equal(gripper_velocity("close", 0.2), [-0.2, -0.2])
    np.testing.assert_array_equal(gripper_velocity("hold", 0.2), [0.0, 0.0])
    # Fully open / closed maps to the extreme normalized actions.
    np.testing.assert_array_equal(normalize_velocity(gripper_velocity("close", 0.2), -0.2, 0.2), [-1.0, -1.0])
    with pytest.raises(ValueError, match="unknown gripper command 'grab'"):
        gripper_velocity("grab", 0.2)


def test_gripper_opening_command_moves_the_fingers_to_the_width():
    # 30 mm wanted, fingers at 40 mm each (80 mm open): closing, limited to the finger speed.
    np.testing.assert_allclose(gripper_velocity(0.03, 0.2, finger_q_m=[0.04, 0.04]), [-0.2, -0.2])
    # Near the target the speed is proportional: each finger 1 mm short of 15 mm opens at 1 mm / tau.
    np.testing.assert_allclose(gripper_velocity(0.03, 0.2, finger_q_m=[0.014, 0.014]),
                               [0.001 / OPENING_TIME_CONSTANT_S] * 2)
    # Simulated at the control rate, the opening converges without overshoot.
    q = np.array([0.04, 0.04])
    for _ in range(40):
        q = q + 0.01 * gripper_velocity(0.03, 0.2, finger_q_m=q)
    np.testing.assert_allclose(q, [0.015, 0.015], atol=1e-4)
    for bad in (float("nan"), -0.01):
        with pytest.raises(ValueError, match="gripper opening must be a finite width"):
            gripper_velocity(bad, 0.2, finger_q_m=[0.0, 0.0])
    with pytest.raises(ValueError, match="needs the finger positions"):
        gripper_velocity(0.03, 0.2)


@pytest.mark.parametrize("yaw", [0.0, np.pi / 2, -np.pi / 2, np.pi, 2.0, -2.7, 7.0])
def test_world_base_conversion_at_several_yaws(yaw):
    v_W = np.array([0.3, -0.4])
    v_B = world_to_base_velocity(v_W, yaw)
    assert np.linalg.norm(v_B) == pytest.approx(0.5)  # a rotation: speed is kept
    np.testing.assert_allclose(base_to_world_velocity(v_B, yaw), v_W, atol=1e-12)
    # What the env does with the ego-centric action built from v_B gives back the world velocity.
    np.testing.assert_allclose(env_base_world_velocity(normalize_velocity(v_B, -1.0, 1.0), yaw), v_W, atol=1e-12)


def test_world_base_conversion_directions():
    # Facing world +y: world +x lies to the robot's right (base -y), world +y straight ahead (base +x).
    np.testing.assert_allclose(world_to_base_velocity([1.0, 0.0], np.pi / 2), [0.0, -1.0], atol=1e-12)
    np.testing.assert_allclose(world_to_base_velocity([0.0, 1.0], np.pi / 2), [1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(world_to_base_velocity([1.0, 0.0], 0.0), [1.0, 0.0])


def test_world_base_conversion_vectorized():
    yaws = np.array([0.0, 0.5, 2.0, -1.0])
    v_W = np.array([[1.0, 0.0], [0.2, 0.3], [-0.5, 0.5], [0.0, -1.0]])
    v_B = world_to_base_velocity(v_W, yaws)
    assert v_B.shape == (4, 2)
    for k in range(4):
        np.testing.assert_allclose(v_B[k], world_to_base_velocity(v_W[k], float(yaws[k])), atol=1e-12)
    np.testing.assert_allclose(base_to_world_velocity(v_B, yaws), v_W, atol=1e-12)
    # One velocity seen from several yaws.
    assert world_to_base_velocity(np.array([1.0, 0.0]), yaws).shape == (4, 2)


def test_saturated_velocity_clips_joints_and_scales_the_base_as_a_whole():
    limits = np.array([1.0, 1.0, 3.0, 0.5, 2.0])
    yaw = np.pi / 2  # the base faces the world's +y: its x axis is the world's y
    v = saturated_velocity([0.5, 4.0, -5.0, 0.9, 1.0], limits, base_xy=[0, 1], yaw_rad=yaw)
    # the world's (0.5, 4.0) is (4.0, -0.5) in the base frame: scaled by 4 to (1.0, -0.125), the same direction
    np.testing.assert_allclose(v[:2], [0.125, 1.0])
    np.testing.assert_allclose(v[2:], [-3.0, 0.5, 1.0])
    within = np.array([0.3, -0.2, 1.0, 0.1, -2.0])
    np.testing.assert_allclose(saturated_velocity(within, limits, base_xy=[0, 1], yaw_rad=0.3), within)
    np.testing.assert_allclose(saturated_velocity([2.0, -2.0], [1.0, 1.5]), [1.0, -1.5])  # no base
    with pytest.raises(ValueError, match="velocity_limits"):
        saturated_velocity([1.0, 2.0], [1.0])
