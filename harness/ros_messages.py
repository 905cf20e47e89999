"""Pure conversions between numpy and the standard ROS messages of handleit's robot contract.

No transport here: every function takes or returns message objects and numpy arrays, and is tested without a
master (tests/test_ros_messages.py). Messages are read by attribute only, so ROS 1 (rospy/genpy) and ROS 2
(rclpy) message objects both parse; messages are built through a :class:`MessageTypes` (the classes and the
stamp factory of one middleware): :func:`ros1_message_types` for Debian's ROS 1, and an rclpy transport
passes its own.

The contract (README, "Deploying on a robot (ROS)"):

- ``sensor_msgs/PointCloud2``: fields ``x``, ``y``, ``z`` (FLOAT32 or FLOAT64, m) and ``rgb`` (PCL's packing:
  0x00RRGGBB in a FLOAT32 or UINT32 field; ``rgba`` also accepted), optional UINT8 mask fields named after the
  masks (``target_handle``, ``target_link``, ``robot``; 1 = in the mask), optional ``vp_x``, ``vp_y``, ``vp_z``
  (FLOAT32 or FLOAT64, m: the centre of the camera that saw each point, PCL's ``PointWithViewpoint``; the trees
  denoise depth along those rays), in the world frame. Points with a
  NaN or inf coordinate are dropped and counted, not an error: organized clouds (height > 1) mark the pixels
  that saw nothing with NaN (PCL's convention; ``pcl::removeNaNFromPointCloud`` does the same). A cloud with
  no finite point left is an error.
- ``sensor_msgs/JointState``: every joint of the robot except the planar base (x, y, yaw: from odometry),
  positions in m or rad, velocities optional; unknown, missing or repeated names are errors.
- ``nav_msgs/Odometry``: the base pose in the world frame (``header.frame_id``), ``child_frame_id`` the base
  link; its twist in the base frame (REP 105).
- ``geometry_msgs/PointStamped``: the task's goal position in the world frame, where a task has one (where
  a pick task puts its object): an operator's instruction, latched.
- ``geometry_msgs/Twist``: the base velocity command in the base frame (m/s, rad/s).
- ``std_msgs/Float64MultiArray``: a joint group's velocity command (rad/s or m/s) in a fixed joint order:
  what ros_control's ``velocity_controllers/JointGroupVelocityController`` subscribes to on
  ``<controller>/command``, so a robot with ros_control needs no extra node. (``JointTrajectory`` would
  carry names, but velocity-only trajectory points are not what trajectory controllers follow.)
- ``std_msgs/String``: a gripper command, ``open``, ``close``, ``hold`` or an opening in metres (``0.035``).
  It maps one to one onto handleit's :data:`~handleit.types.GripperCommand` and onto a real gripper driver's
  actions (franka_gripper: move to the max width, grasp with force, stop, move to a width);
  ``control_msgs/GripperCommand`` has no stop and is not packaged for Debian 12.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from handleit.clouds import finite_rows
from handleit.control.actions import base_to_world_velocity, world_to_base_velocity
from handleit.harness.ros_env import import_rospy
from handleit.poses import quaternion_of_rotation, rotation_of_quaternion
from handleit.types import GripperCommand

# sensor_msgs/PointField datatypes -> numpy types (the values are fixed by the message definition).
POINT_FIELD_DTYPES = {1: np.int8, 2: np.uint8, 3: np.int16, 4: np.uint16, 5: np.int32, 6: np.uint32,
                      7: np.float32, 8: np.float64}
INT8, UINT8, INT16, UINT16, INT32, UINT32, FLOAT32, FLOAT64 = range(1, 9)
MASK_NAMES = ("target_handle", "target_link", "robot")
VIEWPOINT_FIELDS = ("vp_x", "vp_y", "vp_z")  # PCL's PointWithViewpoint
GRIPPER_WORDS = ("open", "close", "hold")


class RosMessageError(ValueError):
    """A message that breaks the contract (fields, sizes, names, frames, stamps); the text says what is wrong."""


@dataclass(frozen=True)
class MessageTypes:
    """The message classes of one middleware, and how it builds a stamp from seconds."""

    PointCloud2: type
    PointField: type
    JointState: type
    Odometry: type
    Twist: type
    Float64MultiArray: type
    String: type
    stamp: Callable[[float], Any]  # seconds -> the middleware's time object
    Clock: type | None = None  # rosgraph_msgs/Clock: a simulator's time (ROS 2: the same name)
    PointStamped: type | None = None  # geometry_msgs/PointStamped: the task's goal position


def ros1_message_types() -> MessageTypes:
    """Debian's ROS 1 message classes (``handleit.harness.ros_env`` makes them importable)."""
    rospy = import_rospy()  # the messages are importable once Debian's ROS is on sys.path
    from geometry_msgs.msg import PointStamped, Twist  # noqa: PLC0415  lazy: ROS 1 (optional, Debian's packages)
    from nav_msgs.msg import Odometry  # noqa: PLC0415  lazy: ROS 1
    from rosgraph_msgs.msg import Clock  # noqa: PLC0415  lazy: ROS 1
    from sensor_msgs.msg import JointState, PointCloud2, PointField  # noqa: PLC0415  lazy: ROS 1
    from std_msgs.msg import Float64MultiArray, String  # noqa: PLC0415  lazy: ROS 1

    return MessageTypes(PointCloud2, PointField, JointState, Odometry, Twist, Float64MultiArray, String,
                        stamp=lambda t: rospy.Time.from_sec(float(t)), Clock=Clock, PointStamped=PointStamped)


# --------------------------------------------------------------------------------------------------------
# Stamps and frames
# --------------------------------------------------------------------------------------------------------
def stamp_to_s(stamp) -> float:
    """Seconds of a ROS 1 (secs, nsecs) or ROS 2 (sec, nanosec) time."""
    if hasattr(stamp, "secs"):
        return stamp.secs + stamp.nsecs * 1e-9
    if hasattr(stamp, "sec"):
        return stamp.sec + stamp.nanosec * 1e-9
    raise RosMessageError(f"not a ROS time: {stamp!r}")


def check_frame(header, expected: str, what: str) -> None:
    """``header.frame_id`` must name ``expected`` (a leading '/' is ignored, as tf2 does)."""
    if header.frame_id.lstrip("/") != expected.lstrip("/"):
        raise RosMessageError(f"{what}: frame_id {header.frame_id!r}, the contract says {expected!r}")


class StampOrder:
    """Per-stream check that stamps never go backwards (a clock jump, a replayed bag, a second publisher)."""

    def __init__(self):
        self.last_s: dict[str, float] = {}

    def check(self, stream: str, stamp_s: float) -> None:
        if not math.isfinite(stamp_s) or stamp_s <= 0.0:
            raise RosMessageError(f"{stream}: stamp {stamp_s} s is not set (zero) or not finite")
        last = self.last_s.get(stream)
        if last is not None and stamp_s < last:
            raise RosMessageError(f"{stream}: stamp went backwards from {last:.6f} s to {stamp_s:.6f} s")
        self.last_s[stream] = stamp_s


# --------------------------------------------------------------------------------------------------------
# sensor_msgs/PointCloud2
# --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cloud:
    """A parsed point cloud: finite points only."""

    points: np.ndarray  # [N, 3] float32, in frame_id (m)
    colors: np.ndarray  # [N, 3] uint8
    masks: dict[str, np.ndarray]  # name -> [N] bool
    frame_id: str
    stamp_s: float
    dropped_invalid: int  # points with a NaN or inf coordinate (organized clouds: pixels that saw nothing)
    # From vp_x, vp_y, vp_z, when sent: the distinct camera centres [C, 3] (m, float64) and each point's index
    # into them [N] (Observation's sensor_origins and sensor_index); None without them.
    sensor_origins: np.ndarray | None = None
    sensor_index: np.ndarray | None = None

    def point_origins(self) -> np.ndarray | None:
        """``[N, 3]`` the camera centre each point was seen from, or None."""
        return None if self.sensor_origins is None else self.sensor_origins[self.sensor_index]


def pack_rgb(colors: np.ndarray) -> np.ndarray:
    """[N, 3] uint8 -> [N] uint32 0x00RRGGBB (PCL's packing)."""
    c = np.asarray(colors, dtype=np.uint32)
    return (c[:, 0] << 16) | (c[:, 1] << 8) | c[:, 2]


def unpack_rgb(packed: np.ndarray) -> np.ndarray:
    """[N] uint32 0x00RRGGBB -> [N, 3] uint8."""
    p = np.asarray(packed, dtype=np.uint32)
    return np.stack([(p >> 16) & 0xFF, (p >> 8) & 0xFF, p & 0xFF], axis=1).astype(np.uint8)


def cloud_to_msg(points: np.ndarray, colors: np.ndarray, masks: dict[str, np.ndarray], frame_id: str,
                 stamp_s: float, types: MessageTypes, viewpoints: np.ndarray | None = None):
    """An unorganized PointCloud2 (height 1): x, y, z FLOAT32, rgb FLOAT32 (PCL packing), vp_x, vp_y, vp_z
    FLOAT32 when ``viewpoints`` are given, one UINT8 per mask.

    Args:
        points: [N, 3] (m) in ``frame_id``; colors: [N, 3] uint8; masks: name -> [N] bool; viewpoints: [N, 3]
        the camera centre each point was seen from (m, ``frame_id``), or None.
    """
    points = np.asarray(points, dtype=np.float32)
    n = len(points)
    if points.shape != (n, 3) or np.asarray(colors).shape != (n, 3):
        raise ValueError(f"points {points.shape} and colors {np.asarray(colors).shape} must both be [N, 3]")
    if viewpoints is not None and np.asarray(viewpoints).shape != (n, 3):
        raise ValueError(f"viewpoints {np.asarray(viewpoints).shape} must be [N, 3] like points {points.shape}")
    names = list(masks)
    vp = [] if viewpoints is None else [(f, FLOAT32) for f in VIEWPOINT_FIELDS]
    fields = [("x", FLOAT32), ("y", FLOAT32), ("z", FLOAT32), ("rgb", FLOAT32)] + vp + [(m, UINT8) for m in names]
    offsets, offset = [], 0
    for _, datatype in fields:
        offsets.append(offset)
        offset += np.dtype(POINT_FIELD_DTYPES[datatype]).itemsize
    point_step = (offset + 3) // 4 * 4  # padded to 4 bytes, as PCL does
    dtype = np.dtype({"names": [f for f, _ in fields],
                      "formats": ["<f4"] * 3 + ["<u4"] + ["<f4"] * len(vp) + ["u1"] * len(names),  # rgb: FLOAT32 bits
                      "offsets": offsets, "itemsize": point_step})
    data = np.zeros(n, dtype=dtype)
    data["x"], data["y"], data["z"] = points[:, 0], points[:, 1], points[:, 2]
    data["rgb"] = pack_rgb(colors)
    if viewpoints is not None:
        v = np.asarray(viewpoints, dtype=np.float32)
        for i, f in enumerate(VIEWPOINT_FIELDS):
            data[f] = v[:, i]
    for m in names:
        mask = np.asarray(masks[m])
        if mask.shape != (n,):
            raise ValueError(f"mask {m!r} has shape {mask.shape}, expected ({n},)")
        data[m] = mask.astype(np.uint8)
    msg = types.PointCloud2()
    msg.header.stamp = types.stamp(stamp_s)
    msg.header.frame_id = frame_id
    msg.height, msg.width = 1, n
    msg.fields = [types.PointField(name=f, offset=o, datatype=d, count=1) for (f, d), o in zip(fields, offsets)]
    msg.is_bigendian = False
    msg.point_step = point_step
    msg.row_step = point_step * n
    msg.data = data.tobytes()
    msg.is_dense = bool(np.isfinite(points).all())
    return msg


def cloud_from_msg(msg, frame_id: str | None = None, mask_names: tuple[str, ...] = ()) -> Cloud:
    """Parse a PointCloud2 (organized or not) into finite points, colors and masks.

    Args:
        frame_id: the frame the contract expects (None: any).
        mask_names: UINT8 mask fields that must be present (e.g. a pick task's ``target``); the fields named in
            MASK_NAMES are read too where present.
    Raises:
        RosMessageError: a missing x/y/z/rgb or mask field, a wrong datatype or count, fields that overlap or
        run past point_step, a row_step or data length that does not match, or no finite point.
    """
    if frame_id is not None:
        check_frame(msg.header, frame_id, "PointCloud2")
    width, height, step = int(msg.width), int(msg.height), int(msg.point_step)
    n = width * height
    if n == 0:
        raise RosMessageError("PointCloud2 is empty (width x height = 0): nothing to perceive")
    fields = {f.name: f for f in msg.fields}
    names = [f.name for f in msg.fields]
    if len(set(names)) != len(names):
        raise RosMessageError(f"PointCloud2 has repeated fields: {names}")
    missing = [f for f in ("x", "y", "z") if f not in fields]
    rgb_name = "rgb" if "rgb" in fields else "rgba" if "rgba" in fields else None
    if rgb_name is None:
        missing.append("rgb")
    missing += [m for m in mask_names if m not in fields]
    if missing:
        raise RosMessageError(f"PointCloud2 lacks the field(s) {missing}; it has {names}")
    order = ">" if msg.is_bigendian else "<"
    present_vp = [f for f in VIEWPOINT_FIELDS if f in fields]
    if present_vp and len(present_vp) != len(VIEWPOINT_FIELDS):
        raise RosMessageError(f"PointCloud2 has the viewpoint field(s) {present_vp} but not all of "
                              f"{list(VIEWPOINT_FIELDS)}")
    formats, offsets, used = [], [], []
    mask_fields = list(dict.fromkeys([*mask_names, *(m for m in MASK_NAMES if m in fields)]))
    for name in ["x", "y", "z", rgb_name] + present_vp + mask_fields:
        f = fields[name]
        allowed = ((FLOAT32, FLOAT64) if name in ("x", "y", "z", *VIEWPOINT_FIELDS)
                   else (FLOAT32, UINT32) if name == rgb_name else (UINT8,))
        if f.datatype not in allowed or f.count != 1:
            raise RosMessageError(
                f"PointCloud2 field {name!r} has datatype {f.datatype} x {f.count}; the contract allows "
                f"{[np.dtype(POINT_FIELD_DTYPES[a]).name for a in allowed]} x 1")
        size = np.dtype(POINT_FIELD_DTYPES[f.datatype]).itemsize
        if f.offset < 0 or f.offset + size > step:
            raise RosMessageError(f"PointCloud2 field {name!r} at offset {f.offset} ({size} bytes) runs past "
                                  f"point_step {step}")
        for other, o, s in used:
            if f.offset < o + s and o < f.offset + size:
                raise RosMessageError(f"PointCloud2 fields {other!r} and {name!r} overlap")
        used.append((name, f.offset, size))
        formats.append(np.dtype(POINT_FIELD_DTYPES[f.datatype]).newbyteorder(order))
        offsets.append(f.offset)
    row_step = int(msg.row_step)
    if row_step < width * step:
        raise RosMessageError(f"PointCloud2 row_step {row_step} < width {width} x point_step {step}")
    data = bytes(msg.data) if not isinstance(msg.data, (bytes, bytearray)) else msg.data
    if len(data) != row_step * height:
        raise RosMessageError(f"PointCloud2 data has {len(data)} bytes, expected row_step {row_step} x height "
                              f"{height} = {row_step * height} (truncated or padded)")
    dtype = np.dtype({"names": [u[0] for u in used], "formats": formats, "offsets": offsets, "itemsize": step})
    rows = np.frombuffer(data, dtype=np.uint8).reshape(height, row_step)[:, : width * step]
    cloud = np.ascontiguousarray(rows).view(dtype).reshape(-1)
    xyz = np.stack([cloud["x"], cloud["y"], cloud["z"]], axis=1).astype(np.float32)
    finite = finite_rows(xyz)
    if not finite.any():
        raise RosMessageError(f"PointCloud2 has no finite point (all {n} are NaN or inf)")
    # The bits as uint32 (a float rgb is 0x00RRGGBB reinterpreted: a denormal, never converted as a number).
    packed = cloud[rgb_name].view(np.dtype(np.uint32).newbyteorder(order)).astype(np.uint32)
    masks = {m: cloud[m][finite] != 0 for m in mask_fields}
    origins = index = None
    if present_vp:
        viewpoints = np.stack([cloud[f][finite] for f in VIEWPOINT_FIELDS], axis=1).astype(np.float64)
        if not np.isfinite(viewpoints).all():
            raise RosMessageError("PointCloud2 has NaN or inf viewpoints (vp_x, vp_y, vp_z) at finite points")
        origins, index = distinct_rows(viewpoints)
    return Cloud(points=xyz[finite], colors=unpack_rgb(packed[finite]), masks=masks,
                 frame_id=msg.header.frame_id, stamp_s=stamp_to_s(msg.header.stamp),
                 dropped_invalid=int(n - finite.sum()), sensor_origins=origins, sensor_index=index)


def distinct_rows(rows: np.ndarray, few: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``rows`` [N, k] and each row's index into them [N] int32. A cloud's viewpoints are a
    few cameras: one vectorised pass per camera (~5 ms for 192,000 points and three cameras, where
    ``np.unique(axis=0)`` sorts them all in ~200 ms); past ``few`` distinct rows, ``np.unique``."""
    index = np.full(len(rows), -1, dtype=np.int32)
    columns = [np.ascontiguousarray(rows[:, k]) for k in range(rows.shape[1])]
    distinct = []
    while len(distinct) < few:
        left = np.flatnonzero(index < 0)
        if not len(left):
            return np.asarray(distinct).reshape(-1, rows.shape[1]), index
        row = rows[left[0]]
        match = np.ones(len(left), dtype=bool)
        for column, value in zip(columns, row):  # column by column: np.all(..., axis=1) is ~15x slower
            match &= column[left] == value
        index[left[match]] = len(distinct)
        distinct.append(row)
    unique, inverse = np.unique(rows, axis=0, return_inverse=True)
    return unique, inverse.reshape(-1).astype(np.int32)


def goal_to_msg(p_W: np.ndarray, frame_id: str, stamp_s: float, types: MessageTypes):
    """A PointStamped of the task's goal position (m, ``frame_id``)."""
    p = np.asarray(p_W, dtype=float)
    if p.shape != (3,) or not np.isfinite(p).all():
        raise ValueError(f"goal must be 3 finite numbers (m), got {p_W!r}")
    msg = types.PointStamped()
    msg.header.stamp = types.stamp(stamp_s)
    msg.header.frame_id = frame_id
    msg.point.x, msg.point.y, msg.point.z = (float(v) for v in p)
    return msg


def goal_from_msg(msg, frame_id: str) -> np.ndarray:
    """The goal position [3] (m) of a PointStamped in ``frame_id``; RosMessageError on another frame or NaN."""
    check_frame(msg.header, frame_id, "goal PointStamped")
    p = np.array([msg.point.x, msg.point.y, msg.point.z], dtype=float)
    if not np.isfinite(p).all():
        raise RosMessageError(f"goal PointStamped has a NaN or inf coordinate: {p.tolist()}")
    return p


# --------------------------------------------------------------------------------------------------------
# sensor_msgs/JointState
# --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Joints:
    position: np.ndarray  # [n] in the expected order (m, rad)
    velocity: np.ndarray  # [n]; zeros where the message gives none
    stamp_s: float


def joint_state_to_msg(names, position, velocity, stamp_s: float, types: MessageTypes):
    msg = types.JointState()
    msg.header.stamp = types.stamp(stamp_s)
    msg.name = list(names)
    msg.position = [float(v) for v in position]
    msg.velocity = [float(v) for v in velocity]
    return msg


def joints_from_msg(msg, expected: tuple[str, ...]) -> Joints:
    """Positions and velocities of the ``expected`` joints, in that order.

    Raises:
        RosMessageError: unknown, missing or repeated names, lengths that do not match, NaN or inf values.
    """
    names = list(msg.name)
    if len(set(names)) != len(names):
        raise RosMessageError(f"JointState names a joint twice: {names}")
    unknown = [n for n in names if n not in expected]
    missing = [n for n in expected if n not in names]
    if unknown or missing:
        raise RosMessageError(f"JointState: unknown joints {unknown}, missing joints {missing} "
                              f"(the contract: {list(expected)})")
    position = np.asarray(msg.position, dtype=np.float64)
    velocity = np.asarray(msg.velocity, dtype=np.float64)
    if len(position) != len(names):
        raise RosMessageError(f"JointState has {len(names)} names and {len(position)} positions")
    if len(velocity) not in (0, len(names)):
        raise RosMessageError(f"JointState has {len(names)} names and {len(velocity)} velocities")
    if len(velocity) == 0:
        velocity = np.zeros(len(names))
    if not (np.isfinite(position).all() and np.isfinite(velocity).all()):
        raise RosMessageError("JointState has NaN or inf positions or velocities")
    index = [names.index(n) for n in expected]
    return Joints(position[index], velocity[index], stamp_to_s(msg.header.stamp))


# --------------------------------------------------------------------------------------------------------
# nav_msgs/Odometry (the base pose)
# --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BaseState:
    X_WB: np.ndarray  # 4x4 pose of the base in the world
    xy_yaw: np.ndarray  # [3] x, y (m), yaw (rad): the planar base joints
    velocity_W: np.ndarray  # [3] vx, vy in the world (m/s), yaw rate (rad/s)
    stamp_s: float


def yaw_of(X: np.ndarray) -> float:
    return math.atan2(X[1, 0], X[0, 0])


def odometry_to_msg(X_WB: np.ndarray, velocity_W: np.ndarray, world_frame: str, base_frame: str, stamp_s: float,
                    types: MessageTypes):
    """Odometry of the base: pose in ``world_frame``, twist in the base frame (REP 105)."""
    msg = types.Odometry()
    msg.header.stamp = types.stamp(stamp_s)
    msg.header.frame_id, msg.child_frame_id = world_frame, base_frame
    p = msg.pose.pose.position
    p.x, p.y, p.z = (float(v) for v in X_WB[:3, 3])
    q = msg.pose.pose.orientation
    q.w, q.x, q.y, q.z = (float(c) for c in quaternion_of_rotation(X_WB[:3, :3]))
    yaw = yaw_of(X_WB)
    v_B = world_to_base_velocity(np.asarray(velocity_W[:2], dtype=float), yaw)
    msg.twist.twist.linear.x, msg.twist.twist.linear.y = float(v_B[0]), float(v_B[1])
    msg.twist.twist.angular.z = float(velocity_W[2])
    return msg


def base_from_odometry(msg, world_frame: str, base_frame: str) -> BaseState:
    """The base state from Odometry; frames are checked, the quaternion must have norm 1 (within 1e-3)."""
    check_frame(msg.header, world_frame, "Odometry")
    if msg.child_frame_id.lstrip("/") != base_frame.lstrip("/"):
        raise RosMessageError(f"Odometry: child_frame_id {msg.child_frame_id!r}, the contract says {base_frame!r}")
    p, o = msg.pose.pose.position, msg.pose.pose.orientation
    q = np.array([o.w, o.x, o.y, o.z], dtype=float)
    values = np.concatenate([[p.x, p.y, p.z], q])
    if not np.isfinite(values).all() or abs(np.linalg.norm(q) - 1.0) > 1e-3:
        raise RosMessageError(f"Odometry pose is not finite or its quaternion is not unit: {values}")
    X = np.eye(4)
    X[:3, :3] = rotation_of_quaternion(q / np.linalg.norm(q))
    X[:3, 3] = [p.x, p.y, p.z]
    t = msg.twist.twist
    v = np.array([t.linear.x, t.linear.y, t.angular.z], dtype=float)
    if not np.isfinite(v).all():
        raise RosMessageError(f"Odometry twist is not finite: {v}")
    yaw = yaw_of(X)
    v_W = np.concatenate([base_to_world_velocity(v[:2], yaw), v[2:]])
    return BaseState(X, np.array([p.x, p.y, yaw]), v_W, stamp_to_s(msg.header.stamp))


# --------------------------------------------------------------------------------------------------------
# Commands: geometry_msgs/Twist, std_msgs/Float64MultiArray, std_msgs/String
# --------------------------------------------------------------------------------------------------------
def twist_to_msg(v_B_xy_yaw: np.ndarray, types: MessageTypes):
    """Base velocity command: vx, vy in the base frame (m/s), yaw rate (rad/s)."""
    v = np.asarray(v_B_xy_yaw, dtype=float)
    if v.shape != (3,) or not np.isfinite(v).all():
        raise ValueError(f"base velocity must be 3 finite values (vx, vy, wz), got {v}")
    msg = types.Twist()
    msg.linear.x, msg.linear.y, msg.angular.z = (float(c) for c in v)
    return msg


def twist_from_msg(msg) -> np.ndarray:
    """[vx, vy, wz] in the base frame; the other components must be zero (a planar base)."""
    v = np.array([msg.linear.x, msg.linear.y, msg.angular.z], dtype=float)
    other = np.array([msg.linear.z, msg.angular.x, msg.angular.y], dtype=float)
    if not (np.isfinite(v).all() and np.isfinite(other).all()):
        raise RosMessageError(f"Twist has NaN or inf: linear {v[:2]}, angular z {v[2]}")
    if np.any(other != 0):
        raise RosMessageError(f"Twist for a planar base: linear.z, angular.x, angular.y must be 0, got {other}")
    return v


def velocities_to_msg(values: np.ndarray, types: MessageTypes):
    v = np.asarray(values, dtype=float)
    if not np.isfinite(v).all():
        raise ValueError(f"joint velocities must be finite, got {v}")
    msg = types.Float64MultiArray()
    msg.data = [float(c) for c in v]
    return msg


def velocities_from_msg(msg, n: int, what: str) -> np.ndarray:
    v = np.asarray(msg.data, dtype=float)
    if v.shape != (n,):
        raise RosMessageError(f"{what}: {len(v)} velocities, the contract says {n}")
    if not np.isfinite(v).all():
        raise RosMessageError(f"{what}: NaN or inf velocity in {v}")
    return v


def gripper_to_msg(command: GripperCommand, types: MessageTypes):
    msg = types.String()
    if isinstance(command, str):
        if command not in GRIPPER_WORDS:
            raise ValueError(f"unknown gripper command {command!r}; choose {GRIPPER_WORDS} or an opening (m)")
        msg.data = command
    else:
        opening = float(command)
        if not math.isfinite(opening) or opening < 0:
            raise ValueError(f"gripper opening must be a finite width >= 0 m, got {command!r}")
        msg.data = repr(opening)
    return msg


def gripper_from_msg(msg) -> GripperCommand:
    text = msg.data.strip()
    if text in GRIPPER_WORDS:
        return text
    try:
        opening = float(text)
    except ValueError:
        raise RosMessageError(f"gripper command {msg.data!r}: expected {GRIPPER_WORDS} or an opening (m)") from None
    if not math.isfinite(opening) or opening < 0:
        raise RosMessageError(f"gripper opening must be a finite width >= 0 m, got {msg.data!r}")
    return opening
