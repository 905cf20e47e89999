"""The pure ROS message conversions (handleit.harness.ros_messages), without a master: real ROS 1 message classes,
serialized to bytes and back as the transport would, and the contract's bad inputs."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from handleit.control.actions import world_to_base_velocity
from handleit.harness import ros_messages as rm
from handleit.harness.ros_env import ros_available
from handleit.poses import quaternion_of_rotation, rotation_of_quaternion

pytestmark = pytest.mark.skipif(not ros_available(), reason="ROS 1 not installed (scripts/setup.sh installs it)")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def types() -> rm.MessageTypes:
    return rm.ros1_message_types()


def wire(msg):
    """Serialize and deserialize, as TCPROS does: what a subscriber really receives."""
    buf = io.BytesIO()
    msg.serialize(buf)
    out = type(msg)()
    out.deserialize(buf.getvalue())
    return out


def test_rospy_imports_without_shadowing_the_pinned_packages():
    """Debian's dist-packages are appended last: rospy comes from Debian, numpy, torch, scipy and yaml from .venv."""
    code = ("from handleit.harness.ros_env import import_rospy; rospy = import_rospy()\n"
            "import numpy, scipy, torch, yaml, sensor_msgs.msg, nav_msgs.msg, geometry_msgs.msg, std_msgs.msg\n"
            "for m in (rospy, sensor_msgs, nav_msgs, numpy, scipy, torch, yaml): print(m.__name__, m.__file__)\n"
            "print('version', numpy.__version__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    files = dict(line.split(" ", 1) for line in out.splitlines())
    for name in ("rospy", "sensor_msgs", "nav_msgs"):
        assert files[name].startswith("/usr/lib/python3/dist-packages/"), files[name]
    for name in ("numpy", "scipy", "torch", "yaml"):
        assert files[name].startswith(sys.prefix), f"{name} from {files[name]}, not the environment {sys.prefix}"
    assert files["version"].startswith("1."), "numpy must stay below 2 (mplib)"


def test_cloud_round_trip(types):
    rng = np.random.default_rng(0)
    points = rng.normal(size=(500, 3)).astype(np.float32)
    colors = rng.integers(0, 256, size=(500, 3)).astype(np.uint8)
    masks = {m: rng.random(500) < 0.3 for m in rm.MASK_NAMES}
    msg = wire(rm.cloud_to_msg(points, colors, masks, "world", 12.5, types))
    assert msg.point_step == 20 and msg.row_step == 20 * 500 and len(msg.data) == 10000
    cloud = rm.cloud_from_msg(msg, "world", rm.MASK_NAMES)
    np.testing.assert_array_equal(cloud.points, points)
    np.testing.assert_array_equal(cloud.colors, colors)
    for m in rm.MASK_NAMES:
        np.testing.assert_array_equal(cloud.masks[m], masks[m])
    assert cloud.stamp_s == pytest.approx(12.5) and cloud.dropped_invalid == 0 and cloud.frame_id == "world"


def test_cloud_viewpoints_round_trip_into_sensor_origins(types):
    """vp_x, vp_y, vp_z (PCL's PointWithViewpoint): each point's camera centre, back as the Observation's
    sensor_origins and sensor_index; a cloud without them has none; a partial set or a NaN viewpoint is an error."""
    rng = np.random.default_rng(1)
    points = rng.normal(size=(300, 3)).astype(np.float32)
    colors = rng.integers(0, 256, size=(300, 3)).astype(np.uint8)
    cameras = np.array([[0.1, 0.0, 1.5], [0.0, 0.1, 1.5], [-0.1, 0.0, 1.5]])
    which = rng.integers(0, 3, size=300)
    points[7] = np.nan  # a pixel that saw nothing: dropped with its viewpoint
    msg = wire(rm.cloud_to_msg(points, colors, {}, "world", 1.0, types, viewpoints=cameras[which]))
    cloud = rm.cloud_from_msg(msg, "world")
    keep = np.isfinite(points).all(axis=1)
    np.testing.assert_allclose(cloud.point_origins(), cameras[which][keep], atol=1e-6)
    assert cloud.sensor_origins.shape == (3, 3) and cloud.sensor_index.shape == (keep.sum(),)
    assert rm.cloud_from_msg(wire(rm.cloud_to_msg(points, colors, {}, "world", 1.0, types)), "world").point_origins() is None
    partial = wire(rm.cloud_to_msg(points, colors, {}, "world", 1.0, types, viewpoints=cameras[which]))
    partial.fields = [f for f in partial.fields if f.name != "vp_z"]
    with pytest.raises(rm.RosMessageError, match="viewpoint field"):
        rm.cloud_from_msg(partial, "world")
    bad = cameras[which].copy()
    bad[3] = np.nan
    with pytest.raises(rm.RosMessageError, match="NaN or inf viewpoints"):
        rm.cloud_from_msg(wire(rm.cloud_to_msg(points, colors, {}, "world", 1.0, types, viewpoints=bad)), "world")
    with pytest.raises(ValueError, match="viewpoints"):
        rm.cloud_to_msg(points, colors, {}, "world", 1.0, types, viewpoints=cameras)


def test_cloud_written_by_rospys_own_helper_parses(types):
    """A cloud built by sensor_msgs.point_cloud2 (float64 x/y/z, uint32 rgb: another valid layout)."""
    from sensor_msgs import point_cloud2
    from std_msgs.msg import Header

    fields = [types.PointField("x", 0, rm.FLOAT64, 1), types.PointField("y", 8, rm.FLOAT64, 1),
              types.PointField("z", 16, rm.FLOAT64, 1), types.PointField("rgb", 24, rm.UINT32, 1)]
    header = Header(frame_id="world", stamp=types.stamp(3.0))
    rows = [(1.0, 2.0, 3.0, 0xFF8000), (4.0, 5.0, 6.0, 0x0000FF)]
    cloud = rm.cloud_from_msg(wire(point_cloud2.create_cloud(header, fields, rows)), "world")
    np.testing.assert_array_equal(cloud.points, [[1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(cloud.colors, [[255, 128, 0], [0, 0, 255]])
    assert cloud.masks == {}


def test_organized_cloud_with_nan_pixels_and_row_padding(types):
    """An organized 2 x 3 cloud, rows padded to 64 bytes, NaN where the camera saw nothing: dropped, counted."""
    points = np.arange(18, dtype=np.float32).reshape(6, 3)
    points[[1, 4]] = np.nan
    colors = np.full((6, 3), 7, np.uint8)
    flat = rm.cloud_to_msg(points, colors, {}, "world", 1.0, types)
    msg = types.PointCloud2(header=flat.header, height=2, width=3, fields=flat.fields, is_bigendian=False,
                            point_step=flat.point_step, row_step=64, is_dense=False)
    rows = np.frombuffer(flat.data, np.uint8).reshape(2, 3 * flat.point_step)
    msg.data = np.concatenate([rows, np.zeros((2, 64 - rows.shape[1]), np.uint8)], axis=1).tobytes()
    cloud = rm.cloud_from_msg(wire(msg), "world")
    assert cloud.dropped_invalid == 2
    np.testing.assert_array_equal(cloud.points, points[[0, 2, 3, 5]])


@pytest.mark.parametrize("breakage, message", [
    ("no_rgb", "lacks the field"),
    ("no_mask", "lacks the field"),
    ("x_int", "datatype"),
    ("rgb_uint8", "datatype"),
    ("count", "datatype"),
    ("short_step", "runs past point_step"),
    ("overlap", "overlap"),
    ("truncated", "truncated"),
    ("row_step", "row_step"),
    ("empty", "empty"),
    ("all_nan", "no finite point"),
    ("frame", "frame_id"),
])
def test_bad_clouds_raise_clear_errors(types, breakage, message):
    points = np.ones((4, 3), np.float32)
    msg = rm.cloud_to_msg(points, np.zeros((4, 3), np.uint8), {"target_handle": np.ones(4, bool)}, "world", 1.0,
                          types)
    fields = {f.name: f for f in msg.fields}
    if breakage == "no_rgb":
        msg.fields = [f for f in msg.fields if f.name != "rgb"]
    elif breakage == "no_mask":
        msg.fields = [f for f in msg.fields if f.name != "target_handle"]
    elif breakage == "x_int":
        fields["x"].datatype = rm.INT32
    elif breakage == "rgb_uint8":
        fields["rgb"].datatype = rm.UINT8
    elif breakage == "count":
        fields["z"].count = 3
    elif breakage == "short_step":
        msg.point_step, msg.row_step = 12, 48
        msg.data = msg.data[:48]
    elif breakage == "overlap":
        fields["y"].offset = 2
    elif breakage == "truncated":
        msg.data = msg.data[:-5]
    elif breakage == "row_step":
        msg.row_step = 10
    elif breakage == "empty":
        msg = rm.cloud_to_msg(np.zeros((0, 3)), np.zeros((0, 3), np.uint8), {}, "world", 1.0, types)
    elif breakage == "all_nan":
        msg = rm.cloud_to_msg(np.full((4, 3), np.nan), np.zeros((4, 3), np.uint8), {}, "world", 1.0, types)
    elif breakage == "frame":
        msg.header.frame_id = "camera_link"
    with pytest.raises(rm.RosMessageError, match=message):
        rm.cloud_from_msg(wire(msg), "world", ("target_handle",) if breakage == "no_mask" else ())


def test_joint_state_order_and_errors(types):
    expected = ("a", "b", "c")
    msg = wire(rm.joint_state_to_msg(["c", "a", "b"], [3.0, 1.0, 2.0], [], 5.0, types))
    joints = rm.joints_from_msg(msg, expected)
    np.testing.assert_array_equal(joints.position, [1, 2, 3])
    np.testing.assert_array_equal(joints.velocity, [0, 0, 0])
    bad = {
        "unknown joints ['d']": rm.joint_state_to_msg(["a", "b", "c", "d"], [1, 2, 3, 4], [], 5.0, types),
        "missing joints ['c']": rm.joint_state_to_msg(["a", "b"], [1, 2], [], 5.0, types),
        "twice": rm.joint_state_to_msg(["a", "a", "b", "c"], [1, 1, 2, 3], [], 5.0, types),
        "positions": rm.joint_state_to_msg(["a", "b", "c"], [1, 2], [], 5.0, types),
        "velocities": rm.joint_state_to_msg(["a", "b", "c"], [1, 2, 3], [1], 5.0, types),
        "NaN": rm.joint_state_to_msg(["a", "b", "c"], [1, float("nan"), 3], [], 5.0, types),
    }
    for text, msg in bad.items():
        with pytest.raises(rm.RosMessageError, match=text.replace("[", r"\[").replace("]", r"\]")):
            rm.joints_from_msg(wire(msg), expected)


def test_odometry_round_trip_and_frames(types):
    yaw = 0.7
    X = np.eye(4)
    X[:3, :3] = [[np.cos(yaw), -np.sin(yaw), 0], [np.sin(yaw), np.cos(yaw), 0], [0, 0, 1]]
    X[:3, 3] = [1.0, -2.0, 0.0]
    v_W = np.array([0.3, -0.1, 0.2])
    msg = wire(rm.odometry_to_msg(X, v_W, "world", "mobile_base", 2.0, types))
    assert msg.twist.twist.linear.x == pytest.approx(world_to_base_velocity(v_W[:2], yaw)[0])
    base = rm.base_from_odometry(msg, "world", "mobile_base")
    np.testing.assert_allclose(base.X_WB, X, atol=1e-12)
    np.testing.assert_allclose(base.xy_yaw, [1.0, -2.0, yaw])
    np.testing.assert_allclose(base.velocity_W, v_W)
    with pytest.raises(rm.RosMessageError, match="child_frame_id"):
        rm.base_from_odometry(msg, "world", "base_link")
    with pytest.raises(rm.RosMessageError, match="frame_id"):
        rm.base_from_odometry(msg, "odom", "mobile_base")
    msg.pose.pose.orientation.w = 0.0
    with pytest.raises(rm.RosMessageError, match="unit"):
        rm.base_from_odometry(msg, "world", "mobile_base")


def test_quaternion_of_rotation_is_the_inverse_of_rotation_of_quaternion():
    rng = np.random.default_rng(1)
    for _ in range(50):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        q2 = quaternion_of_rotation(rotation_of_quaternion(q))
        np.testing.assert_allclose(q2 * np.sign(q2 @ q), q, atol=1e-9)


def test_stamps_going_backwards_and_unset_are_errors():
    order = rm.StampOrder()
    order.check("joint_states", 1.0)
    order.check("joint_states", 1.0)  # equal: a repeated stamp is allowed
    order.check("points", 0.5)  # streams are independent
    with pytest.raises(rm.RosMessageError, match="went backwards"):
        order.check("joint_states", 0.99)
    with pytest.raises(rm.RosMessageError, match="not set"):
        order.check("odom", 0.0)


def test_commands_round_trip(types):
    np.testing.assert_array_equal(rm.twist_from_msg(wire(rm.twist_to_msg([0.1, -0.2, 0.3], types))), [0.1, -0.2, 0.3])
    np.testing.assert_array_equal(rm.velocities_from_msg(wire(rm.velocities_to_msg([1, 2], types)), 2, "arm"), [1, 2])
    for command in ("open", "close", "hold", 0.035):
        assert rm.gripper_from_msg(wire(rm.gripper_to_msg(command, types))) == command
    with pytest.raises(rm.RosMessageError, match="contract says 7"):
        rm.velocities_from_msg(wire(rm.velocities_to_msg([1, 2], types)), 7, "arm")
    with pytest.raises(rm.RosMessageError, match="expected"):
        rm.gripper_from_msg(types.String(data="squeeze"))
    with pytest.raises(rm.RosMessageError, match="width >= 0"):
        rm.gripper_from_msg(types.String(data="-0.01"))
    twist = rm.twist_to_msg([0, 0, 0], types)
    twist.linear.z = 1.0
    with pytest.raises(rm.RosMessageError, match="planar"):
        rm.twist_from_msg(twist)
    with pytest.raises(ValueError):
        rm.twist_to_msg([np.nan, 0, 0], types)


def test_a_pick_tasks_target_mask_is_read_when_asked_for(types):
    """Pick tasks mark their object ``target`` (not ``target_handle``): run-ros asks for the task's masks."""
    rng = np.random.default_rng(2)
    points = rng.normal(size=(50, 3)).astype(np.float32)
    masks = {"target": rng.random(50) < 0.5, "robot": rng.random(50) < 0.2}
    msg = wire(rm.cloud_to_msg(points, np.zeros((50, 3), np.uint8), masks, "world", 1.0, types))
    cloud = rm.cloud_from_msg(msg, "world", ("target", "robot"))
    np.testing.assert_array_equal(cloud.masks["target"], masks["target"])
    with pytest.raises(rm.RosMessageError, match="target_handle"):
        rm.cloud_from_msg(msg, "world", ("target_handle",))


def test_goal_round_trip_and_bad_goals(types):
    msg = wire(rm.goal_to_msg(np.array([0.1, -0.2, 0.3]), "world", 2.0, types))
    np.testing.assert_allclose(rm.goal_from_msg(msg, "world"), [0.1, -0.2, 0.3])
    with pytest.raises(rm.RosMessageError, match="frame"):
        rm.goal_from_msg(msg, "odom")
    msg.point.x = float("nan")
    with pytest.raises(rm.RosMessageError, match="NaN"):
        rm.goal_from_msg(msg, "world")
    with pytest.raises(ValueError, match="3 finite numbers"):
        rm.goal_to_msg(np.array([np.nan, 0, 0]), "world", 1.0, types)
