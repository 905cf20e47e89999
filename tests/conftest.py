"""Shared test set-up: generated assets go to one temporary cache per test session, never ~/.cache."""

from __future__ import annotations

import os

import pytest

import handleit.envs
from handleit.harness.sim_robot import robot_model_of


@pytest.fixture(scope="session", autouse=True)
def _asset_cache_in_tmp(tmp_path_factory):
    # Set before any env is built; the robot description and cabinets are generated once per session.
    previous = os.environ.get("HANDLEIT_CACHE_DIR")
    os.environ["HANDLEIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("asset_cache"))
    yield
    if previous is None:
        os.environ.pop("HANDLEIT_CACHE_DIR", None)
    else:
        os.environ["HANDLEIT_CACHE_DIR"] = previous


@pytest.fixture(scope="module")
def drawer_model():
    """The single-arm mobile robot's model, from an OpenCabinetDrawer env (closed again at once)."""
    env = handleit.envs.make("OpenCabinetDrawer", obs_mode="pointcloud")
    try:
        return robot_model_of(env)
    finally:
        env.close()
