"""`handleit run-ros --drive-lag`: a real robot's drive lags for latency compensation, checked before ROS starts."""

from __future__ import annotations

import argparse

import pytest

from handleit.harness.ros_commands import _run_ros, add_commands


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="handleit")
    add_commands(p.add_subparsers(dest="command", required=True))
    return p


def test_drive_lags_are_parsed_and_bad_ones_named(capsys):
    args = parser().parse_args(["run-ros", "--drive-lag", "0.03"])
    assert args.drive_lag == (0.03,)
    assert parser().parse_args(["run-ros"]).drive_lag is None
    for bad in ("abc", "-0.1", "nan", "0.1,,0.2"):
        with pytest.raises(SystemExit):
            parser().parse_args(["run-ros", "--drive-lag", bad])
        assert "--drive-lag" in capsys.readouterr().err


def test_a_lag_per_joint_must_name_every_joint(capsys):
    args = parser().parse_args(["run-ros", "--task", "PickCube", "--drive-lag", "0.01,0.02,0.03"])
    assert _run_ros(args) == 2  # before any ROS connection
    err = capsys.readouterr().err
    assert "3 values" in err and "panda_joint1" in err
