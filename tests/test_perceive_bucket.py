"""PerceiveBucket on a segmenter's bucket: the ball lying in it is told apart by its colour.

The geometric and color_marker segmenters find the bucket as the cluster at the prompt, which takes in the ball
in it (the simulator's mask does not): on bucket-test-005 70-95 of its points, 8-14 cm up, and the hug's walls
fitted to them made the hug fail on 7 of 10 test episodes of that bucket."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import py_trees
from py_trees.common import Access

import handleit.envs
from handleit.behaviors.bucket_nodes import PerceiveBucket
from handleit.behaviors.solver_tools import ToolsSpec, make_tools
from handleit.harness.sim_robot import SimRobot
from handleit.perception.bucket_rim import ball_points_mask


def test_the_ball_in_a_segmented_bucket_is_not_the_buckets():
    robot = SimRobot(handleit.envs.make("MoveBucket", obs_mode="pointcloud", split="test"))
    try:
        obs = robot.reset(seed=5, options={"model_id": "bucket-test-005"})
    finally:
        robot.env.close()
    ball = ball_points_mask(obs.colors) & ~obs.masks["robot"]
    assert ball.sum() >= 20 and not (ball & obs.masks["target_link"]).any()  # the simulator's mask leaves it out
    runs = {}
    for name, bucket in (("simulator", obs.masks["target_link"]), ("cluster", obs.masks["target_link"] | ball)):
        tools = make_tools(ToolsSpec(robot.model, side="right", sides=("right", "left")),
                           namespace=f"/bucket_test_{time.monotonic_ns()}")
        bb = py_trees.blackboard.Client(name="test", namespace=tools.namespace)
        for key in ("observation", "tick", "target_xy_W"):
            bb.register_key(key, access=Access.WRITE)
        bb.observation = dataclasses.replace(obs, masks={**obs.masks, "target_link": bucket})
        bb.tick, bb.target_xy_W = 0, (0.0, 0.0)  # the platform at the origin, as the bucket tree has it
        for key in ("rim", "bucket_points_W", "ball_points_W"):
            bb.register_key(key, access=Access.READ)
        node = PerceiveBucket("perceive bucket", tools)
        node.tick_once()
        runs[name] = (np.array(bb.bucket_points_W), np.array(bb.ball_points_W), bb.rim)
    (sim_bucket, sim_ball, sim_rim), (bucket, ball_points, rim) = runs["simulator"], runs["cluster"]
    assert len(bucket) == len(sim_bucket) and len(ball_points) == len(sim_ball) == int(ball.sum())
    assert rim.height_m == sim_rim.height_m and np.allclose(rim.center_W, sim_rim.center_W)
