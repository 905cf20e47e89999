"""SAPIEN's picture formats are process-wide, and ManiSkill3 switches "Color" to uint8 when it builds an env:
the bundled envs' colours must not depend on it (a full test run, ManiSkill3's adapter tests first, once
turned every rendered colour into 0 or 255 per channel and hid the colour marker)."""

from __future__ import annotations

import numpy as np
import sapien

import handleit.envs
from handleit.types import DEFAULT_MARKER_RGB


def _colors():
    env = handleit.envs.make("PickCube", obs_mode="pointcloud", target_marker_rgb=DEFAULT_MARKER_RGB)
    obs, _ = env.reset(seed=1)
    return obs["pointcloud"]["rgb"][obs["pointcloud"]["valid"]], obs["pointcloud"]["target"][obs["pointcloud"]["valid"]]


def test_colours_are_the_same_whatever_the_process_wide_color_format():
    as_floats, target = _colors()
    sapien.render.set_picture_format("Color", "r8g8b8a8unorm")  # what ManiSkill3's minimal shader pack sets
    try:
        as_bytes, _ = _colors()
    finally:
        sapien.render.set_picture_format("Color", "r32g32b32a32sfloat")
    assert as_floats.dtype == as_bytes.dtype == np.uint8
    assert np.abs(as_floats.astype(int) - as_bytes.astype(int)).max() <= 1
    # The painted cube keeps its hue: green dominates.
    cube = as_bytes[target].astype(int)
    assert len(cube) and (cube[:, 1] > cube[:, 0] + 40).mean() > 0.9
