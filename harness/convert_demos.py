"""Convert demonstrations to another controller by closed-loop replay (ManiSkill2 (arXiv 2302.04659) Sec. 2.2).

The demonstrations are recorded with ``normalized_joint_vel`` (joint velocities). To convert one to a target
controller, a new env with the target control mode is reset to the same seed and object; at every source step
t the converter reads the target env's current state, computes the target action that drives the robot to
the source's next state (joint positions q_src(t+1); for ``pd_ee_delta_pose`` the tool pose FK(q_src(t+1))
relative to the current one, FK(.) * T_tgt(t)^-1 as in the paper), steps, and continues from the state
actually reached: closed loop, so execution errors do not accumulate as an open-loop replay's do.

How the next state is reached by the PD position drives (``envs/controllers.py``): the robot's links are
gravity-compensated and the drives are overdamped, so within one control step of dt seconds a joint moves
toward its target q* like a first-order system with time constant tau = damping / stiffness:
q(t+1) = q* + (q(t) - q*) exp(-dt / tau). Solving for q* gives the target that reaches q_src(t+1) in one
step: q* = (q_src(t+1) - q(t) beta) / (1 - beta), beta = exp(-dt / tau) (about 10x the step's motion at
tau = 0.1 s, dt = 0.01 s). ``pd_ee_delta_pose`` solves its delta pose to arm joint targets by IK, so its
delta is led the same way in Cartesian space: the delta from the current tool pose to FK(q_src(t+1)) (the
source's next arm joints on the target's current base), divided by 1 - beta. Normalized actions that
would exceed +-1 are clipped, and, as ManiSkill's converter does
(``mani_skill.trajectory.utils.actions.conversion``), the same source state is then aimed at for up to
``max_repeats`` more steps, so a converted episode may be longer than its source. Base velocities
(``pd_ee_delta_pose`` drives the base by velocity) replay the source's command plus a proportional
correction of the base's position error. Grippers: while the source closes its fingers (velocity below half
its limit toward closing) the target closes past contact (-1, so the fingers press as the source's did);
otherwise the fingers track the source's finger positions.

After the source's last step the converter holds its last state for up to ``settle_steps`` steps, as the
env's success check may need a step or two more. A converted demo is kept only when the target env reports
success; the rest are listed in the JSON's ``failed_episodes`` with their tracking errors.
"""

from __future__ import annotations

import math
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scipy.spatial.transform import Rotation

from handleit.baselines.demo_files import load_demo_info, read_demo
from handleit.envs.controllers import ControlConfig, EEDeltaPose, GripperPosition, JointPosition, JointVelocity
from handleit.harness.demos import (
    DemoFileWriter,
    EpisodeData,
    RecordingWrapper,
    _env,
    _log,
    run_jobs,
    write_part_file,
)

SOURCE_MODE = "normalized_joint_vel"
CONVERTIBLE_MODES = ("pd_joint_pos", "pd_joint_delta_pos", "pd_ee_delta_pose")
GRIPPER_CLOSING = -0.5  # a source finger action below this (normalized velocity) means "closing": press


@dataclass(frozen=True)
class ConvertOptions:
    max_repeats: int = 2  # extra steps toward one source state while the action is clipped (ManiSkill: 1 to 3)
    settle_steps: int = 20  # steps holding the source's last state after its end, waiting for success
    base_gain: float = 0.5  # fraction of the base's position error corrected per step (velocity-driven base)
    # Share of the deadbeat correction of the tracking error (1: all of it in one step). 1 tracks the stationary
    # Panda best (PickCube: 5 vs 8 mrad); the mobile arm's shoulder overshoots with it (OpenCabinetDrawer
    # to pd_joint_pos: 17 of 20 converted demos succeed with 1, 19 with 0.5).
    error_gain: float = 0.5


# ----------------------------------------------------------------------------------------------------
# The target action for one step
# ----------------------------------------------------------------------------------------------------
def first_order_target(q_now: np.ndarray, q_next: np.ndarray, tau_s: float, dt_s: float) -> np.ndarray:
    """The position target q* that moves a first-order drive (time constant ``tau_s``) from ``q_now`` to
    ``q_next`` in ``dt_s``: q* = (q_next - q_now beta) / (1 - beta), beta = exp(-dt / tau)."""
    beta = math.exp(-dt_s / tau_s)
    return (np.asarray(q_next, np.float64) - np.asarray(q_now, np.float64) * beta) / (1.0 - beta)


def drive_target(q_now: np.ndarray, q_src_now: np.ndarray, q_src_next: np.ndarray, tau_s: float, dt_s: float,
                 error_gain: float = 1.0) -> np.ndarray:
    """The position target toward ``q_src_next``: the source's step led by L = beta / (1 - beta) (what a
    first-order drive needs to make that step in ``dt_s``), plus ``error_gain`` times the deadbeat correction of
    the current tracking error ``q_src_now - q_now``:
    q* = q_src_next + L (q_src_next - q_src_now) + error_gain L (q_src_now - q_now).
    With ``error_gain`` 1 this is :func:`first_order_target` (q_now to q_src_next in one step); less damps the
    correction for joints whose inertia makes the first-order model overshoot."""
    beta = math.exp(-dt_s / tau_s)
    L = beta / (1.0 - beta)
    q_now, q_src_now, q_src_next = (np.asarray(v, np.float64) for v in (q_now, q_src_now, q_src_next))
    return q_src_next + L * (q_src_next - q_src_now) + error_gain * L * (q_src_now - q_now)


def _tau(drive) -> float:
    if drive.stiffness <= 0:
        raise ValueError(f"a position drive needs a stiffness > 0, got {drive}")
    return drive.damping / drive.stiffness


class TargetActions:
    """Computes target-controller actions toward source states, from the target env's current state."""

    def __init__(self, env, options: ConvertOptions, config: ControlConfig | None = None):
        base = env.unwrapped
        if base.control_mode not in CONVERTIBLE_MODES:
            raise ValueError(f"cannot convert to {base.control_mode!r}; choose one of {', '.join(CONVERTIBLE_MODES)}")
        self.env, self.options = env, options
        self.config = config or base.control_config
        self.dt_s = 1.0 / base.control_freq
        robot = base.robot
        # The source (normalized_joint_vel): action i drives joint i; its velocity limit per joint.
        self.src_vel_limit = np.zeros(robot.dof)
        if len(robot.base_index):
            self.src_vel_limit[robot.base_index] = self.config.base_vel_limits
        for side in robot.sides:
            self.src_vel_limit[robot.arm_index[side]] = self.config.arm_vel_limit_radps
            self.src_vel_limit[robot.finger_index[side]] = self.config.finger_vel_limit_mps

    def __call__(self, q_next_src: np.ndarray, a_src: np.ndarray, q_src: np.ndarray) -> tuple[np.ndarray, bool]:
        """The target action toward source state ``q_next_src`` (after source action ``a_src``, taken at source
        state ``q_src``); and whether a normalized part had to be clipped."""
        base = self.env.unwrapped
        robot, controller = base.robot, base.controller
        q = robot.qpos.astype(np.float64)
        actions, clipped = [], False
        for part in controller.parts:
            if isinstance(part, EEDeltaPose):
                a, c = self._ee_delta(part, q, q_src, q_next_src)
            elif isinstance(part, JointPosition):
                q_star = drive_target(q[part.index], q_src[part.index], q_next_src[part.index], _tau(part.drive),
                                      self.dt_s, self.options.error_gain)
                if part.delta is None:
                    a, c = q_star, False  # absolute targets; the env bounds them by the joint limits
                else:
                    a = (q_star - q[part.index]) / part.delta
                    c = bool(np.max(np.abs(a)) > 1.0 + 1e-6)
            elif isinstance(part, JointVelocity):
                a, c = self._velocity(part, q, q_src, a_src)
            elif isinstance(part, GripperPosition):
                a, c = self._gripper(part, q, q_next_src, a_src), False
            else:
                raise TypeError(f"no conversion for controller part {type(part).__name__}")
            clipped |= c
            actions.append(np.clip(a, part.low, part.high))
        return np.concatenate(actions).astype(np.float32), clipped

    def _ee_delta(self, part: EEDeltaPose, q: np.ndarray, q_src: np.ndarray,
                  q_next_src: np.ndarray) -> tuple[np.ndarray, bool]:
        """Delta tool pose toward FK(q_src(t+1)) from the current tool pose T(t) (ManiSkill2 Sec. 2.2:
        FK(.) * T_tgt(t)^-1), in the controller's convention (translation and rotation vector in the base
        frame B, normalized by the controller's step sizes).

        FK puts the source's arm joints on the target's current base, so the arm is aimed at the source's arm
        configuration. The delta is led as the joint targets are (:func:`drive_target`), in Cartesian space:
        the source's step FK(q_src(t)) -> FK(q_src(t+1)) and the tracking error T(t) -> FK(q_src(t)), each
        times L (a joint-space lead maps through FK to wild poses once the arm lags)."""
        robot = part.robot
        X_WR = robot.articulation.root_pose.to_transformation_matrix()

        def fk(q_arm: np.ndarray) -> np.ndarray:  # X_WT with the arm at q_arm; pinocchio works in the root R
            q_full = q.copy()
            q_full[part.index] = q_arm
            part.pinocchio.compute_forward_kinematics(q_full)
            return X_WR @ part.pinocchio.get_link_pose(part.tcp_index).to_transformation_matrix()

        X_WTnext, X_WTsrc = fk(q_next_src[part.index]), fk(q_src[part.index])
        X_WT = robot.X_WT(part.side).to_transformation_matrix()
        R_WB = robot.X_WB.to_transformation_matrix()[:3, :3]
        beta = math.exp(-self.dt_s / _tau(part.drive))
        L, g = beta / (1.0 - beta), self.options.error_gain

        def delta_B(X_from: np.ndarray, X_to: np.ndarray) -> np.ndarray:  # (dp, rotvec) in B, world-fixed axes
            dp = R_WB.T @ (X_to[:3, 3] - X_from[:3, 3])
            return np.concatenate([dp, Rotation.from_matrix(R_WB.T @ X_to[:3, :3] @ X_from[:3, :3].T @ R_WB).as_rotvec()])

        d = delta_B(X_WT, X_WTnext) + L * (delta_B(X_WTsrc, X_WTnext) + g * delta_B(X_WT, X_WTsrc))
        dp_B, drot_B = d[:3] / part.pos_delta_m, d[3:] / part.rot_delta_rad
        clipped = bool(np.max(np.abs(dp_B)) > 1.0 + 1e-6 or np.linalg.norm(drot_B) > 1.0 + 1e-6)
        norm = np.linalg.norm(drot_B)
        if norm > 1.0:  # scale the rotation as a whole (ManiSkill's converter), keeping its axis
            drot_B = drot_B / norm
        return np.concatenate([dp_B, drot_B]), clipped

    def _velocity(self, part: JointVelocity, q: np.ndarray, q_src: np.ndarray, a_src: np.ndarray):
        """The source's velocity command plus a proportional correction of the position error (world frame
        for the base's x/y), in the part's normalized, ego-centric convention."""
        idx = part.index
        v = a_src[idx] * self.src_vel_limit[idx]  # the source's command (normalized_joint_vel is symmetric)
        if part.ego_base:  # the source's x/y command is ego-centric at the source's yaw
            v[:2] = _rotate(v[:2], q_src[idx[2]])
        v = v + self.options.base_gain * (q_src[idx] - q[idx]) / self.dt_s
        if part.ego_base:
            v[:2] = _rotate(v[:2], -q[idx[2]])
        a = (v - part._offset) / part._scale
        return a, bool(np.max(np.abs(a)) > 1.0 + 1e-6)

    def _gripper(self, part: GripperPosition, q: np.ndarray, q_next_src: np.ndarray, a_src: np.ndarray):
        if float(np.mean(a_src[part.index])) < GRIPPER_CLOSING:
            return np.array([-1.0])
        finger = first_order_target(np.mean(q[part.index]), np.mean(q_next_src[part.index]),
                                    _tau(part.drive), self.dt_s)
        lo, hi = part.range
        return np.array([(2.0 * finger - (hi + lo)) / (hi - lo)])


def _rotate(v_xy: np.ndarray, yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([c * v_xy[0] - s * v_xy[1], s * v_xy[0] + c * v_xy[1]])


# ----------------------------------------------------------------------------------------------------
# One episode
# ----------------------------------------------------------------------------------------------------
def convert_episode(demo: dict, env_info: dict, target_mode: str, options: ConvertOptions = ConvertOptions(),
                    record: bool = True) -> tuple[EpisodeData | None, dict]:
    """Replay ``demo`` (from :func:`~handleit.harness.demos.iter_demos`, point clouds not needed) in a
    ``target_mode`` env, closed loop. Returns the converted episode (None unless ``record``) and stats:
    success, steps, source steps, repeats, and the tracking errors at the end of each source step (joint
    positions of base and arms, rad or m; tool positions, m)."""
    if env_info["control_mode"] != SOURCE_MODE:
        raise ValueError(f"demos recorded with {env_info['control_mode']!r} cannot be converted: the converter "
                         f"reads {SOURCE_MODE} actions")
    if target_mode not in CONVERTIBLE_MODES:
        raise ValueError(f"unknown target control mode {target_mode!r}; choose one of {', '.join(CONVERTIBLE_MODES)}")
    meta_src = demo["episode"]
    q_src = demo["obs"]["agent"]["qpos"].astype(np.float64)
    tcp_src = demo["obs"]["agent"]["tcp_pose"].astype(np.float64)
    a_src = demo["actions"].astype(np.float64)
    T = len(a_src)
    limit = T * (1 + options.max_repeats) + options.settle_steps
    env = _env(env_info["task"], meta_src["split"], env_info["max_episode_steps"] * (1 + options.max_repeats)
               + options.settle_steps, target_mode)
    meta = {k: meta_src[k] for k in ("index", "seed", "model_id", "split", "solver", "reset_kwargs") if k in meta_src}
    meta.update(control_mode=target_mode, source_episode_id=meta_src["episode_id"], source_elapsed_steps=T)
    episode = EpisodeData(meta)
    obs_cfg = env_info["obs_config"]
    stepper = RecordingWrapper(env, episode, env_info["points"], np.random.default_rng(meta["seed"]),
                               obs_cfg.get("min_height_m")) if record else env
    stepper.reset(**meta_src["reset_kwargs"])
    base = env.unwrapped
    arm_base = np.sort(np.concatenate([base.robot.base_index, *base.robot.arm_index.values()])).astype(int)
    actions = TargetActions(env, options)
    q_err, tcp_err, repeats, steps, success, truncated = [], [], 0, 0, False, False
    q_start_err = float(np.max(np.abs(base.robot.qpos[arm_base] - q_src[0][arm_base])))
    for t in range(T + options.settle_steps):
        k = min(t + 1, T)  # the source state aimed at; after the source's end, its last state
        a_k, q_from = (a_src[t], q_src[t]) if t < T else (_hold(a_src[-1], base.robot), q_src[T])
        for attempt in range(1 + options.max_repeats):
            action, clipped = actions(q_src[k], a_k, q_from)
            _, _, terminated, truncated, info = stepper.step(action)
            steps += 1
            success = bool(info.get("success", False))
            if terminated or truncated or steps >= limit or not clipped:
                break
            repeats += 1
        if t < T:
            q_err.append(float(np.max(np.abs(base.robot.qpos[arm_base] - q_src[k][arm_base]))))
            tcp_err.append(_tool_errors(base.robot, tcp_src[k]))
        if terminated or truncated or steps >= limit:
            break
    if not success and record and not episode.truncated[-1]:
        episode.truncated[-1] = True  # the converter's own time limit ended it
    meta.update(success=success, elapsed_steps=steps)
    stats = {"success": success, "steps": steps, "source_steps": T, "repeats": repeats,
             "start_qpos_error": q_start_err,
             "max_qpos_error": max(q_err, default=0.0), "mean_qpos_error": float(np.mean(q_err)) if q_err else 0.0,
             "max_tcp_error_m": max((e[0] for e in tcp_err), default=0.0),
             "max_tcp_rot_error_rad": max((e[1] for e in tcp_err), default=0.0)}
    meta.update({k: round(v, 6) if isinstance(v, float) else v for k, v in stats.items()
                 if k not in ("success", "steps", "source_steps")})
    return (episode if record else None), stats


def _hold(a_last: np.ndarray, robot) -> np.ndarray:
    """The source action after its end: no motion, the grippers as they were last commanded."""
    a = np.zeros_like(a_last)
    for index in robot.finger_index.values():
        a[index] = a_last[index]
    return a


def _tool_errors(robot, tcp_pose7s: np.ndarray) -> tuple[float, float]:
    """The largest distance (m) and rotation angle (rad), over the arms, between the robot's tool poses and
    ``tcp_pose7s`` ([7 * arms]: x, y, z, qw, qx, qy, qz per arm, in ``robot.sides`` order)."""
    dist, angle = 0.0, 0.0
    for i, side in enumerate(robot.sides):
        X = robot.X_WT(side)
        p, (w, x, y, z) = tcp_pose7s[7 * i: 7 * i + 3], tcp_pose7s[7 * i + 3: 7 * i + 7]
        dist = max(dist, float(np.linalg.norm(X.p - p)))
        dot = abs(float(np.dot(X.q, [w, x, y, z])))  # both (qw, qx, qy, qz); q and -q are one rotation
        angle = max(angle, 2.0 * math.acos(min(1.0, dot)))
    return dist, angle


# ----------------------------------------------------------------------------------------------------
# A whole file
# ----------------------------------------------------------------------------------------------------
class _ConvertJob:
    """Convert one source episode and write it to a part file (picklable for worker processes)."""

    def __init__(self, src: str, env_info: dict, target_mode: str, options: ConvertOptions, parts_dir: str):
        self.src, self.env_info, self.target_mode = src, env_info, target_mode
        self.options, self.parts_dir = options, parts_dir

    def __call__(self, episode_id: int) -> dict:
        start = time.perf_counter()
        result = {"meta": {}, "part": None, "error": None, "stats": {}}
        try:
            demo = read_demo(self.src, episode_id, load_pointcloud=False)
            episode, stats = convert_episode(demo, self.env_info, self.target_mode, self.options)
            result["meta"], result["stats"] = episode.meta, stats
            episode.meta["wall_time_s"] = round(time.perf_counter() - start, 3)
            if stats["success"]:
                m = episode.meta
                result["part"] = str(write_part_file(Path(self.parts_dir) / f"{m['split']}-{m['seed']}-{m['model_id']}.h5",
                                                     episode))
        except Exception:  # noqa: BLE001  one bad episode must not end the run: report it, retry on resume
            result["error"] = traceback.format_exc(limit=8)
        result["wall_time_s"] = time.perf_counter() - start
        return result


def convert_demos(src: Path | str, to: str, out: Path | str, episodes: int | None = None, workers: int = 1,
                  resume: bool = False, options: ConvertOptions = ConvertOptions(), log=print) -> dict:
    """Convert the demos of ``src`` (``<task>.h5``) to control mode ``to``; write ``<out>/<task>.h5`` (+ .json)
    in the same layout, keeping the converted demos that still succeed. Returns counts (converted, failed,
    errors, skipped), the share that still succeed and the tracking errors."""
    src = Path(src)
    if to not in CONVERTIBLE_MODES:
        raise ValueError(f"unknown target control mode {to!r}; choose one of {', '.join(CONVERTIBLE_MODES)}")
    if not src.exists():
        raise FileNotFoundError(f"no demo file {src}")
    doc = load_demo_info(src)
    info = doc["env_info"]
    if info["control_mode"] != SOURCE_MODE:
        raise ValueError(f"{src} holds {info['control_mode']} demos; the converter reads {SOURCE_MODE} demos")
    out = Path(out)
    if (out / src.name).resolve() == src.resolve():
        raise ValueError(f"--out {out} would overwrite the source {src}; choose another folder")
    env = _env(info["task"], doc["episodes"][0]["split"] if doc["episodes"] else "train", info["max_episode_steps"],
               to)
    # "method" is written into every converted file and compared on --resume, so its text stays as first written,
    # though it names ManiSkill2 (arXiv 2302.04659) by the path of a copy outside this repository.
    out_info = dict(info, control_mode=to, action_dim=int(env.action_space.shape[0]),
                    action_labels=list(env.unwrapped.controller.labels),
                    env_kwargs=dict(info.get("env_kwargs", {}), control_mode=to),
                    source={"file": src.name, "control_mode": info["control_mode"],
                            "method": "closed-loop replay (papers/000 Sec. 2.2)", "options": asdict(options)})
    sources = doc["episodes"][:episodes] if episodes is not None else doc["episodes"]
    stats = {"converted": 0, "failed": 0, "errors": 0, "skipped": 0, "max_qpos_error": [], "repeats": 0}
    with DemoFileWriter(out, src.stem, out_info, resume) as writer:
        for line in writer.repairs:
            _log(log, f"repaired {writer.h5_path}: {line}")
        done = writer.done_keys()
        pending = [e for e in sources if DemoFileWriter.key(e) not in done]
        stats["skipped"] = len(sources) - len(pending)
        _log(log, f"{src} -> {to}: {len(pending)} demos to convert ({stats['skipped']} done) -> {writer.h5_path}")
        by_id = {e["episode_id"]: e for e in pending}

        def on_result(episode_id, result) -> None:
            entry = by_id[episode_id]
            if result["error"]:
                stats["errors"] += 1
                _log(log, f"  error converting episode {episode_id} (seed {entry['seed']}):\n{result['error']}")
                return
            s = result["stats"]
            stats["max_qpos_error"].append(s["max_qpos_error"])
            stats["repeats"] += s["repeats"]
            if result["part"]:
                writer.append(Path(result["part"]))
                stats["converted"] += 1
            else:
                writer.add_failure(result["meta"])
                stats["failed"] += 1
            _log(log, f"  episode {episode_id} (seed {entry['seed']}, {entry['model_id']}): "
                      f"{'success' if s['success'] else 'FAILED'}, {s['steps']} steps for {s['source_steps']}, "
                      f"max joint error {s['max_qpos_error']:.3f}, max tool error {s['max_tcp_error_m'] * 1000:.1f} mm / "
                      f"{s['max_tcp_rot_error_rad']:.3f} rad")

        job = _ConvertJob(str(src), info, to, options, str(writer.parts_dir))
        run_jobs([e["episode_id"] for e in pending], job, workers, on_result)
    n = stats["converted"] + stats["failed"]
    errors = stats.pop("max_qpos_error")
    stats.update(share=stats["converted"] / n if n else float("nan"),
                 median_max_qpos_error=float(np.median(errors)) if errors else float("nan"),
                 h5=str(writer.h5_path), json=str(writer.json_path))
    return stats


# ----------------------------------------------------------------------------------------------------
# Command line: `handleit convert-demos`
# ----------------------------------------------------------------------------------------------------
def add_commands(subparsers) -> None:
    """Add ``convert-demos`` to the ``handleit`` command line."""
    conv = subparsers.add_parser("convert-demos", help="convert demonstrations to another controller by "
                                 "closed-loop replay (ManiSkill2 Sec. 2.2); print the share that still succeeds")
    conv.add_argument("--in", dest="src", required=True, help="a demo file, e.g. demos/PickCube.h5")
    conv.add_argument("--to", required=True, choices=CONVERTIBLE_MODES)
    conv.add_argument("--out", required=True, help="output folder (same file names, same layout)")
    conv.add_argument("--episodes", type=int, default=None, help="convert only the first N demos")
    conv.add_argument("--workers", type=int, default=1)
    conv.add_argument("--resume", action="store_true")
    conv.set_defaults(func=_convert_command)


def _convert_command(args) -> int:
    try:
        stats = convert_demos(args.src, args.to, args.out, episodes=args.episodes, workers=args.workers,
                              resume=args.resume)
    except (FileExistsError, FileNotFoundError, ValueError) as error:
        print(f"handleit convert-demos: {error}", file=sys.stderr)
        return 2
    n = stats["converted"] + stats["failed"]
    share = f"{stats['converted'] / n:.3f}" if n else "-"
    print(f"{Path(args.src).name} -> {args.to}: {stats['converted']} of {n} converted demos still succeed "
          f"(share {share}); {stats['errors']} errors; {stats['skipped']} skipped; -> {stats['h5']}")
    return 1 if stats["errors"] else 0
