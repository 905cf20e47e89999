"""The ROS commands of the CLI: ``handleit serve-ros`` (a bundled env as a ROS robot, ``ros_sim_server``) and
``handleit run-ros`` (a task's tree against whatever robot is on the contract's topics, ``ros_robot`` and
``realtime_runner``). rospy itself is imported only when a command runs (``ros_env``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time

import numpy as np

import handleit.envs
from handleit.harness.realtime_priority import request_realtime
from handleit.harness.realtime_runner import RealtimeRunner
from handleit.harness.realtime_sim import TrackedSolver, warm_up_solver
from handleit.harness.ros_robot import Ros1Transport, RosBridgeError, RosRobot
from handleit.harness.ros_sim_server import SimRobotServer
from handleit.harness.sim_robot import robot_model_of
from handleit.harness.solvers import make_solver


def _serve_ros(args: argparse.Namespace) -> int:
    """Publish a bundled env as a ROS robot on the contract's topics, in real time (simulated /clock)."""
    transport = Ros1Transport("handleit_sim", anonymous=False)
    server = SimRobotServer(args.task, transport, split=args.split, seed=args.seed, max_steps=args.max_steps,
                            real_time_factor=args.real_time_factor, camera_hz=args.camera_hz,
                            command_timeout_s=args.command_timeout, sensor_perturbation=args.sensor_perturbation)
    # The stand-in robot's driver loop at a real-time priority, as a robot's drivers run (its ROS threads not).
    # Only for a simulator that keeps its schedule: one that falls behind (renders slower than the wall budget
    # of a step) steps without sleeping, and at SCHED_FIFO that takes a whole core from everything else.
    scheduling = request_realtime(args.rt_priority).describe() if args.rt_priority else "SCHED_OTHER"
    print(f"serving {args.task} ({args.split}) on ROS: camera every {server.camera_every} steps "
          f"({1 / (server.camera_every * server.dt_s):.0f} Hz simulated), target real-time factor "
          f"{args.real_time_factor}, stepping at {scheduling}", flush=True)
    try:
        for episode in range(args.episodes):
            server.seed = args.seed + episode
            result = server.serve_episode(wait_for_commands_s=args.wait_for_tree)
            print(json.dumps(result), flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        transport.shutdown()
        server.env.close()
    return 0


def _run_ros(args: argparse.Namespace) -> int:
    """Run a task's behavior tree against whatever robot is on the contract's topics, in real time."""
    env = handleit.envs.make(args.task, obs_mode="pointcloud")
    model = robot_model_of(env)  # the same description files and joint groups as the simulator's
    task_masks = tuple(env.unwrapped.mask_names)  # what the task's tree reads with the simulator's masks
    env.close()
    if args.drive_lag is not None:
        lags = args.drive_lag * len(model.joint_names) if len(args.drive_lag) == 1 else args.drive_lag
        if len(lags) != len(model.joint_names):
            print(f"handleit run-ros: --drive-lag has {len(lags)} values; the robot has {len(model.joint_names)} "
                  f"joints ({', '.join(model.joint_names)})", file=sys.stderr)
            return 2
        model = dataclasses.replace(model, drive_time_constants_s=np.asarray(lags, dtype=np.float64))
    prompt = None
    if args.prompt:
        values = [float(v) for v in args.prompt.split(",")]
        if len(values) not in (3, 6):
            print("handleit run-ros: --prompt takes x,y,z or xmin,ymin,zmin,xmax,ymax,zmax (world, m)",
                  file=sys.stderr)
            return 2
        prompt = np.reshape(values, (3,) if len(values) == 3 else (2, 3))
    if args.rt_priority:
        # Before ROS starts its threads, which inherit it: a receiving thread that holds Python's GIL must not be
        # preempted by other processes while the tick waits for that lock (the planning and segmentation
        # workers go back to the default policy as they start).
        request_realtime(args.rt_priority)
    transport = Ros1Transport("handleit_tree")
    # A segmenter other than "simulator" makes the masks itself: the cloud need not carry mask fields.
    mask_fields = {"mask_names": () if args.segmenter != "simulator" else task_masks}
    robot = RosRobot(model, transport, target_prompt_W=prompt, **mask_fields)
    solver = make_solver(args.solver, args.task, model, segmenter=args.segmenter)
    if hasattr(solver, "realtime"):  # a tree solver: plan off the tick thread (read at its reset)
        solver.realtime = args.planning != "inline"
        if solver.realtime:
            solver.planning = args.planning
    tracked = TrackedSolver(solver)  # failed nodes and planning ticks, for the report
    result: dict = {"task": args.task}
    try:
        robot.wait_for_data(timeout_s=args.wait)
        start_step = robot.episode.get("step", 0)
        # What the tree builds on first use (IK, motion planner, the self filter's model) before ticking starts.
        result["warm_up"] = warm_up_solver(solver, robot.observe())
        runner = RealtimeRunner(robot, tracked, rate_hz=1.0 / model.control_dt_s,
                                watchdog_timeout_s=args.watchdog_timeout, rt_priority=args.rt_priority or None)
        deadline = time.monotonic() + args.max_seconds
        report = runner.run(until=lambda: bool(robot.episode.get("done")) or time.monotonic() > deadline)
        episode = robot.episode
        result.update(success=bool(episode.get("success")), steps=episode.get("step", 0) - start_step,
                      seed=episode.get("seed"), server=episode.get("result"), stop_reason=report.stop_reason,
                      error=report.error, failures=report.failures[:5],
                      watchdog_stop_reasons=report.watchdog_stops[:5],
                      dropped_invalid_points=robot.dropped_invalid_points,
                      failed_node=getattr(solver, "failed_node", None), failed_nodes=tracked.failures,
                      prediction_error=report.prediction_error_stats(), **report.tick_stats())
        if hasattr(solver, "diagnostics"):  # the tree as it ended, as `handleit eval` records it
            result["diagnostics"] = solver.diagnostics()
        if args.report_ticks:  # per tick (wall ms), and which solver ticks planned: benchmarks/ros_episodes.py
            result.update(tick_wall_ms=[round(1e3 * t, 2) for t in report.tick_wall_s],
                          solver_wall_ms=[round(1e3 * t, 2) for t in report.solver_wall_s],
                          planning_tick=[int(p) for p in tracked.planning_ticks], plans=tracked.plans())
    except RosBridgeError as error:
        result.update(success=False, error=str(error))
    finally:
        robot.close()
    print(json.dumps(result, default=str), flush=True)
    return 0 if result.get("error") is None else 1


def _rt_priority(text: str) -> int:
    """--rt-priority: 0 (off) or a SCHED_FIFO priority 1-98."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 98:
        raise argparse.ArgumentTypeError(f"must be 0 (off) or a SCHED_FIFO priority 1-98, got {text!r}")
    return value


def add_commands(sub) -> None:
    """Register ``serve-ros`` and ``run-ros`` on the CLI's subparsers."""
    serve = sub.add_parser("serve-ros", help=_serve_ros.__doc__)
    serve.add_argument("--task", default="OpenCabinetDrawer")
    serve.add_argument("--split", default="test", choices=["train", "test"])
    serve.add_argument("--seed", type=int, default=0, help="episode i uses seed + i")
    serve.add_argument("--episodes", type=int, default=1)
    serve.add_argument("--max-steps", type=int, default=200, help="episode length in control steps (100 Hz)")
    serve.add_argument("--real-time-factor", type=float, default=0.5,
                       help="simulated seconds per wall second (1 = real time)")
    serve.add_argument("--camera-hz", type=float, default=10.0, help="point-cloud rate in simulated time")
    serve.add_argument("--wait-for-tree", type=float, default=0.0,
                       help="hold each episode's clock at its start until the first command arrives, or this many "
                            "wall seconds (0: start at once)")
    serve.add_argument("--sensor-perturbation", default="",
                       help="what the sensors add, as the envs' sensor_perturbation (e.g. depth_noise=0.005)")
    serve.add_argument("--command-timeout", type=float, default=0.1,
                       help="simulated seconds after which a command counts as zero (a cmd_vel timeout)")
    serve.add_argument("--rt-priority", type=_rt_priority, default=0,
                       help="step the robot at Linux SCHED_FIFO at this priority (1-98; 0: the default policy), as a "
                            "robot's drivers run; without the permission it warns and goes on")
    serve.set_defaults(func=_serve_ros)
    run = sub.add_parser("run-ros", help=_run_ros.__doc__)
    run.add_argument("--task", default="OpenCabinetDrawer")
    run.add_argument("--solver", default="bt", help="as for handleit eval (bt, idle, ...)")
    run.add_argument("--segmenter", default="simulator",
                     help="the masks the tree reads: simulator (mask fields of the cloud), geometric, color_marker "
                          "(from the cloud alone; see README 'Masks from the sensors')")
    run.add_argument("--prompt", default="",
                     help="the operator's prompt for the geometric segmenter: x,y,z or xmin,ymin,zmin,xmax,ymax,zmax "
                          "in the world frame (m)")
    run.add_argument("--planning", default="process", choices=["process", "thread", "inline"],
                     help="where the tree plans and segments: worker processes (no solver holds the tick's GIL), "
                          "threads of the tick process, or in the tick (behaviors/background.py)")
    run.add_argument("--wait", type=float, default=60.0, help="seconds to wait for the robot's first sensor data")
    run.add_argument("--report-ticks", action="store_true",
                     help="add every tick's time and which ticks planned to the JSON line")
    run.add_argument("--max-seconds", type=float, default=600.0, help="wall-clock limit of the run")
    run.add_argument("--watchdog-timeout", type=float, default=1.0,
                     help="wall seconds without a completed tick before zero velocity is commanded")
    run.add_argument("--rt-priority", type=_rt_priority, default=0,
                     help="tick at Linux SCHED_FIFO at this priority (1-98; 0: the default policy), the watchdog one "
                          "above, as ros2_control's loop runs (50); without the permission it warns and goes on")
    run.add_argument("--drive-lag", type=_drive_lag, default=None,
                     help="each drive's velocity lag for latency compensation (s, first order): one number for every "
                          "joint (0: the drives follow at once), or one per joint in the robot's joint order, "
                          "comma-separated; default: the simulated robot's (mass over damping), to be measured on a "
                          "real robot from a velocity step")
    run.set_defaults(func=_run_ros)


def _drive_lag(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--drive-lag takes seconds, comma-separated; got {text!r}") from None
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise argparse.ArgumentTypeError(f"--drive-lag takes finite seconds >= 0; got {text!r}")
    return values


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="handleit")
    add_commands(parser.add_subparsers(dest="command", required=True))
    ns = parser.parse_args()
    sys.exit(ns.func(ns))
