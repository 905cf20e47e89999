"""The episode executor on a real Ray cluster: two nodes on this machine, on loopback, started and stopped here.

The cluster (``handleit.harness.ray_loopback.LoopbackCluster``): a head and a second node, both on 127.0.0.1 (the
one node address for which Ray's servers listen on loopback only), one CPU each, free ports, each node in a
session of its own; the fixture stops every node when the module ends, whatever happened. Every socket of the
cluster and the driver is checked to listen and connect on loopback only. The evaluation runs through the command
line (``handleit eval --ray 127.0.0.1:PORT``), as a user runs it: the second node is killed while it runs an episode (SIGKILL to every
process of its session: a lost machine), then the driver itself, and ``--resume`` finishes the run. The records
must hold every episode exactly once, with the success and steps that the local back end gives on the same seeds.

Default run: 10 short PickCube episodes (2.5-4 minutes with the cluster's start and the local run, on a busy
2-core machine). ``-m slow``: a longer run, and a crashing and a hanging solver on the cluster.

This process is a driver too (the slow tests): it gets the loopback cluster's driver environment before Ray is
first imported, at collection.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from handleit.harness.evaluation import EpisodeRecord, episode_specs, read_records_file, run_episodes
from handleit.harness.executor import ExecutorError, RayCluster, close_backend
from handleit.harness.ray_loopback import (HEAD_IP, SINGLE_MACHINE_ENV, LoopbackCluster, connected_addresses,
                                           listening_addresses)

ROOT = Path(__file__).resolve().parents[1]
os.environ.update(SINGLE_MACHINE_ENV)


@pytest.fixture(scope="module")
def cluster():
    constants = sys.modules.get("ray._private.ray_constants")  # Ray imported before this module set the environment
    assert constants is None or not constants.ENABLE_RAY_CLUSTER, "Ray read its settings before the driver's were set"
    with LoopbackCluster(nodes=2, cpus_per_node=1) as c:  # stopped on exit, on failure too
        yield c
    assert not c.pids(), "Ray processes outlived the cluster's stop"


def _eval(cluster: LoopbackCluster, out: Path, episodes: int, max_steps: int, *extra: str) -> subprocess.Popen:
    log = (out.parent / f"{out.name}-driver-{time.time_ns()}.log").open("w")
    return subprocess.Popen(
        [sys.executable, "-m", "handleit.harness.cli", "eval", "--task", "PickCube", "--split", "train",
         "--episodes", str(episodes), "--solver", "bt", "--max-steps", str(max_steps), "--ray", cluster.address,
         "--out", str(out), "--episode-timeout", "300", *extra],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=cluster.driver_env())


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _wait(condition, timeout_s: float, what: str, driver: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if driver is not None and driver.poll() is not None:
            pytest.fail(f"the driver exited ({driver.returncode}) before {what}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.2)


def _driver_log(out: Path) -> str:
    return "\n".join(p.read_text() for p in sorted(out.parent.glob(f"{out.name}-driver-*.log")))


def _assert_loopback_only(pids: list[int]) -> set[tuple[str, int]]:
    """Every socket on which these processes listen is bound to a loopback address (not the wildcard), and every
    connection they hold runs between loopback addresses."""
    found = listening_addresses(pids)
    assert found, "no listening socket found: the check read nothing"
    for address, port in found:
        assert _loopback(address), f"a Ray process listens on {address}:{port}, not on loopback"
    connections = connected_addresses(pids)
    assert connections, "no connection found: the check read nothing"
    for (local, _), (remote, remote_port) in connections:
        assert _loopback(local) and _loopback(remote), f"a Ray process is connected to {remote}:{remote_port}"
    return found


def _loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    ip = ip.ipv4_mapped or ip if isinstance(ip, ipaddress.IPv6Address) else ip
    return ip.is_loopback


def _check_exactly_once_and_like_local(records_path: Path, specs, tmp_path: Path) -> None:
    lines = records_path.read_text().splitlines()
    keys = [_key(json.loads(line)) for line in lines]
    assert len(lines) == len(specs), f"{len(lines)} records for {len(specs)} episodes"
    assert sorted(keys) == sorted(s.key for s in specs), "an episode is missing or recorded twice"
    ray_records = read_records_file(records_path)
    assert all(r.error is None for r in ray_records.values()), [r.error for r in ray_records.values() if r.error]
    local = {r.key: r for r in run_episodes(specs, tmp_path / "local" / "records.jsonl", workers=2, progress=False)}
    assert {k: (r.success, r.steps) for k, r in ray_records.items()} == \
        {k: (r.success, r.steps) for k, r in local.items()}, "Ray and the local back end disagree on a seed"


def _key(record: dict) -> tuple:
    return EpisodeRecord(**record).key


def test_an_evaluation_survives_a_lost_node_and_a_killed_driver(cluster, tmp_path):
    episodes, max_steps = 10, 150
    out = tmp_path / "ray"
    records = out / "records.jsonl"
    nodes = cluster.alive_nodes()  # what Ray itself reports
    assert len(set(nodes)) == 2 and all(n.startswith(f"{HEAD_IP}:") for n in nodes), nodes
    first = _eval(cluster, out, episodes, max_steps, "--video", "1")
    try:
        _wait(lambda: _lines(records) >= 1, 300, "the first record", first)
        assert "on 2 Ray actors (1 CPU each) on 2 nodes" in _driver_log(out)
        _assert_loopback_only(cluster.pids() + [first.pid])
        _wait(lambda: any("_EpisodeActor.run" in t for t in cluster.node_titles(1)), 120,
              "an episode running on the second node", first)
        cluster.kill_node(1)  # the second machine is lost, with the episode it was running
        _wait(lambda: "running it again" in _driver_log(out), 120, "the lost node's episode to be re-submitted",
              first)
        _wait(lambda: _lines(records) >= 3, 300, "two more records", first)
        first.kill()  # the driver dies too (SIGKILL: no clean-up)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    done_before = _lines(records)
    assert done_before < episodes, "the run ended before the driver could be killed: nothing was resumed"

    second = _eval(cluster, out, episodes, max_steps, "--video", "1", "--resume")
    assert second.wait(timeout=600) == 0, _driver_log(out)[-3000:]
    assert "on 1 Ray actor (1 CPU each) on 1 node" in _driver_log(out)  # the lost node is gone for good
    videos = list((out / "videos").glob("*.mp4"))  # episode 0's, written by the driver whichever node ran it
    assert len(videos) == 1 and videos[0].read_bytes()[4:8] == b"ftyp", videos
    _check_exactly_once_and_like_local(records, episode_specs("PickCube", "train", episodes, "bt", max_steps),
                                       tmp_path)


def test_an_unreachable_cluster_and_a_missing_ray_are_clear_errors(tmp_path):
    def cli(*args, prelude=""):
        code = f"{prelude}import sys; from handleit.harness.cli import main; sys.exit(main(sys.argv[1:]))"
        return subprocess.run([sys.executable, "-c", code, "eval", "--task", "PickCube", "--episodes", "1",
                               "--solver", "idle", "--out", str(tmp_path), *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=300)

    unreachable = cli("--ray", "127.0.0.2:9")  # nothing listens on the discard port
    assert unreachable.returncode == 2
    assert "cannot reach a Ray cluster at 127.0.0.2:9" in unreachable.stderr and "Traceback" not in unreachable.stderr
    malformed = cli("--ray", "nowhere")
    assert malformed.returncode == 2 and "expected 'auto' or HOST:PORT" in malformed.stderr
    # Ray not installed: importing it fails as it would without the package.
    missing = cli("--ray", "auto", prelude="import sys; sys.modules['ray'] = None; ")
    assert missing.returncode == 2
    assert "--ray needs Ray, which is not installed" in missing.stderr and "pip install" in missing.stderr
    assert "Traceback" not in missing.stderr
    with pytest.raises(ExecutorError, match="cannot reach"):
        RayCluster("127.0.0.2:9")


def test_a_cut_off_last_record_is_dropped_on_resume(tmp_path):
    """The driver killed in the middle of a line: resume drops the cut-off line and records that episode again."""
    specs = episode_specs("PickCube", "train", 2, "idle", 3)
    path = tmp_path / "records.jsonl"
    run_episodes(specs[:1], path, workers=1, progress=False)
    whole = path.read_text()
    path.write_text(whole + whole[: len(whole) // 2])  # half a second record, no newline
    records = run_episodes(specs, path, workers=1, resume=True, progress=False)
    assert len(records) == 2 and len(path.read_text().splitlines()) == 2
    assert [json.loads(line)["seed"] for line in path.read_text().splitlines()] == [s.seed for s in specs]


@pytest.mark.slow
def test_a_longer_run_across_two_nodes_loses_a_node_and_records_every_episode_once(tmp_path):
    """``pytest -m slow tests/test_ray_executor.py``: 40 episodes of 200 steps; the second node lost midway."""
    episodes, max_steps = 40, 200
    with LoopbackCluster(nodes=2, cpus_per_node=1) as c:
        out = tmp_path / "ray"
        driver = _eval(c, out, episodes, max_steps)
        try:
            _wait(lambda: _lines(out / "records.jsonl") >= episodes // 2, 1800, "half the records", driver)
            c.kill_node(1)
            assert driver.wait(timeout=1800) == 0, _driver_log(out)[-3000:]
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait()
        assert "running it again" in _driver_log(out)
        _check_exactly_once_and_like_local(out / "records.jsonl",
                                           episode_specs("PickCube", "train", episodes, "bt", max_steps), tmp_path)


@pytest.mark.slow
def test_a_crashing_and_a_hanging_solver_on_the_cluster_cost_their_episodes_only(cluster, tmp_path):
    specs = (episode_specs("OpenCabinetDrawer", "test", 2, "idle", 5)
             + episode_specs("OpenCabinetDrawer", "test", 1, "tests.eval_solvers:crashing", 5, seed=20)
             + episode_specs("OpenCabinetDrawer", "test", 1, "tests.eval_solvers:hanging", 5, seed=30))
    os.chdir(ROOT)  # the actors import tests.eval_solvers from the driver's path
    backend = RayCluster(cluster.address)
    try:
        records = run_episodes(specs, tmp_path / "records.jsonl", episode_timeout_s=90, progress=False,
                               backend=backend)
    finally:
        close_backend(backend)
    by_solver = {r.solver: r for r in records}
    assert len(records) == 4
    assert "worker lost" in by_solver["tests.eval_solvers:crashing"].error
    assert "(4 attempts)" in by_solver["tests.eval_solvers:crashing"].error  # retried 3 times, then recorded
    assert "exceeded 90 s" in by_solver["tests.eval_solvers:hanging"].error
    assert sum(r.error is None and r.steps == 5 for r in records) == 2
