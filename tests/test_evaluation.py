"""The evaluation harness: records, summary, and one bad episode never ends a run."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from handleit.harness.evaluation import EpisodeRecord, episode_specs, run_episodes, summarize
from handleit.harness.machine_info import cpu_description


def _specs(solver, n=1, seed=0, split="test"):
    return episode_specs("OpenCabinetDrawer", split, n, solver, max_steps=5, seed=seed)


def test_episode_specs_cycle_through_the_split_and_seeds():
    specs = episode_specs("OpenCabinetDoor", "test", 12, "bt", 200, seed=100)
    assert [s.seed for s in specs] == list(range(100, 112))
    assert specs[0].model_id == specs[10].model_id  # 10 test door cabinets
    assert len({s.model_id for s in specs[:10]}) == 10
    with pytest.raises(ValueError, match="unknown task 'PushFridge'"):
        episode_specs("PushFridge", "test", 1, "bt", 200)


def test_bad_episodes_are_recorded_and_the_run_goes_on(tmp_path):
    """An exception, a dead worker and a hung episode each cost one episode; the others complete. An episode that
    raised after some steps keeps them, and its solver's diagnostics."""
    specs = (_specs("idle", 2) + _specs("tests.eval_solvers:raising", seed=10)
             + _specs("tests.eval_solvers:crashing", seed=20) + _specs("tests.eval_solvers:hanging", seed=30)
             + _specs("tests.eval_solvers:raising_later", seed=40))
    path = tmp_path / "records.jsonl"
    # The first episode of a worker starts SAPIEN (seconds, more on a loaded machine): the timeout must
    # leave room for that while still catching the hanging solver.
    records = run_episodes(specs, path, workers=2, episode_timeout_s=90, progress=False)
    by_solver = {}
    for r in records:
        by_solver.setdefault(r.solver, []).append(r)
    assert len(records) == len(specs) == 6
    assert all(r.error is None and r.steps == 5 and not r.success for r in by_solver["idle"])
    assert "this solver always fails" in by_solver["tests.eval_solvers:raising"][0].error
    assert "worker process died (exit code 3)" in by_solver["tests.eval_solvers:crashing"][0].error
    assert "exceeded 90 s" in by_solver["tests.eval_solvers:hanging"][0].error
    later = by_solver["tests.eval_solvers:raising_later"][0]
    assert "fails on its fourth tick" in later.error and later.failed_node == "error"
    assert later.steps == 3 and later.diagnostics == {"ticks": 4}
    assert by_solver["tests.eval_solvers:raising"][0].steps == 0
    lines = path.read_text().splitlines()
    assert len(lines) == 6 and {json.loads(line)["seed"] for line in lines} == {0, 1, 10, 20, 30, 40}


def test_videos_come_back_to_the_driver_and_stay_out_of_the_records(tmp_path):
    """The worker encodes the episode's video and sends it back with the record (on a cluster the worker is on
    another machine); the driver writes it to the spec's path, and the records file holds no video."""
    specs = episode_specs("PickCube", "train", 2, "idle", 4, video_episodes=(0,), video_dir=tmp_path / "videos")
    path = tmp_path / "records.jsonl"
    records = run_episodes(specs, path, workers=1, progress=False)
    assert all(r.error is None and r.video_mp4 is None for r in records)
    assert all(r.machine == cpu_description() and r.machine for r in records)  # the CPU that ran them
    videos = sorted((tmp_path / "videos").iterdir())
    assert [v.name for v in videos] == [Path(specs[0].video_path).name]
    assert videos[0].read_bytes()[4:8] == b"ftyp"  # an mp4 file
    assert all("video_mp4" not in json.loads(line) for line in path.read_text().splitlines())


def test_resume_skips_recorded_episodes(tmp_path):
    path = tmp_path / "records.jsonl"
    specs = _specs("idle", 3)
    done = EpisodeRecord(**{**dataclasses.asdict(EpisodeRecord("OpenCabinetDrawer", "test", "idle", 5, 0, specs[0].model_id, 0)),
                            "success": True})
    with path.open("w") as f:
        for spec in specs:
            rec = dataclasses.replace(done, seed=spec.seed, model_id=spec.model_id, index=spec.index)
            f.write(json.dumps(dataclasses.asdict(rec)) + "\n")
    records = run_episodes(specs, path, workers=2, resume=True, progress=False)
    assert [r.success for r in records] == [True, True, True]  # nothing re-run
    assert len(path.read_text().splitlines()) == 3


def test_records_written_before_the_machine_field_still_load(tmp_path):
    """Records of earlier runs (docs/records) have no ``machine``: they resume and read as before."""
    path = tmp_path / "records.jsonl"
    specs = _specs("idle", 1)
    old = dataclasses.asdict(EpisodeRecord("OpenCabinetDrawer", "test", "idle", 5, specs[0].seed, specs[0].model_id, 0,
                                           success=True))
    del old["machine"], old["video_mp4"]
    path.write_text(json.dumps(old) + "\n")
    records = run_episodes(specs, path, workers=1, resume=True, progress=False)
    assert [(r.success, r.machine) for r in records] == [(True, "")]


def test_summary_has_the_shape_of_the_paper_table():
    recs = []
    for split, wins in (("train", 3), ("test", 1)):
        for i in range(4):
            recs.append(EpisodeRecord("OpenCabinetDrawer", split, "bt", 200, i, "m", i, success=i < wins,
                                      failed_node=None if i < wins else "Move to pregrasp"))
    recs.append(EpisodeRecord("OpenCabinetDrawer", "test", "bt", 200, 9, "m", 9, error="boom", failed_node="error"))
    table = summarize(recs)
    assert "| OpenCabinetDrawer | 0.750 (3/4) | 0.200 (1/5) [1 errors] |" in table
    assert "| OpenCabinetDrawer | bt (200 steps) | Move to pregrasp | 4 |" in table
    assert "| OpenCabinetDrawer | bt (200 steps) | error | 1 |" in table


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == pid and b"spawn_main" in cmdline:
            found.append(int(stat.parent.name))
    return found


def _is_worker(pid: int) -> bool:
    try:
        return b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()  # a zombie's is empty
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_workers_end_when_the_evaluation_is_killed(tmp_path):
    """A killed evaluation (SIGKILL, no clean-up) leaves no worker running episodes nobody will record."""
    parent = subprocess.Popen(
        [sys.executable, "-m", "handleit.harness.cli", "eval", "--task", "OpenCabinetDrawer", "--split", "test",
         "--episodes", "4", "--solver", "idle", "--max-steps", "100000", "--workers", "1", "--out", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        workers = []
        for _ in range(600):  # the worker is up within a few seconds
            workers = _children(parent.pid)
            if workers:
                break
            time.sleep(0.1)
        assert workers, "the evaluation started no worker"
        time.sleep(2.0)  # into its episode
    finally:
        parent.kill()
        parent.wait()
    for _ in range(300):
        if not any(_is_worker(w) for w in workers):
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"workers {workers} outlived the killed evaluation")


def test_two_evaluations_never_write_one_records_file(tmp_path):
    from handleit.harness.evaluation import OutputInUse, _sole_writer

    records = tmp_path / "records.jsonl"
    with _sole_writer(records):
        with pytest.raises(OutputInUse, match="another evaluation is writing"):
            run_episodes(_specs("idle"), records, workers=1, progress=False)
    assert not records.exists()  # the refused run wrote nothing
    assert len(run_episodes(_specs("idle"), records, workers=1, progress=False)) == 1  # free again


def test_segmenters_and_perturbations_are_columns_of_their_own_and_robustness_compares_same_seeds():
    from handleit.harness.evaluation import robustness_table

    recs = []
    for seed in range(4):
        recs.append(EpisodeRecord("PushChair", "test", "bt", 200, seed, "m", seed, success=True))
        recs.append(EpisodeRecord("PushChair", "test", "bt", 200, seed, "m", seed, success=seed < 3,
                                  failed_node=None if seed < 3 else "chair tipping?", segmenter="geometric"))
        recs.append(EpisodeRecord("PushChair", "test", "bt", 200, seed, "m", seed, success=seed < 2,
                                  failed_node=None if seed < 2 else "timeout", perturb="depth_noise=0.005"))
    # A perturbed seed without its unperturbed twin does not count in the ratio.
    recs.append(EpisodeRecord("PushChair", "test", "bt", 200, 9, "m", 9, success=True, perturb="depth_noise=0.005"))
    table = summarize(recs)
    assert "bt [segmenter geometric] (200 steps) test" in table and "bt [depth_noise=0.005] (200 steps) test" in table
    assert "| PushChair | - | 1.000 (4/4) | - | 0.600 (3/5) | - | 0.750 (3/4) |" in table
    robust = robustness_table(recs)
    assert "| PushChair | bt | simulator | 200 | depth_noise=0.005 | 4/4 | 2/4 | 0.50 | timeout 2 |" in robust


def test_composed_trees_record_their_hand_offs_with_the_ground_truth_beside_them(tmp_path):
    """A goal solver on TidyIntoDrawer, 3 steps: the open skill starts at tick 0; the record holds what perception
    believed then (diagnostics.handoffs) and the env's truth of the same predicates (diagnostics.handoff_truth)."""
    specs = episode_specs("TidyIntoDrawer", "test", 1, "goal:InsideOf(object, drawer) & Closed(drawer)", max_steps=3)
    (record,) = run_episodes(specs, tmp_path / "records.jsonl", workers=1, progress=False)
    assert record.error is None, record.error
    handoff, truth = record.diagnostics["handoffs"][0], record.diagnostics["handoff_truth"][0]
    assert (handoff["tick"], handoff["skill"], handoff["event"]) == (0, "open(drawer)", "started")
    assert set(handoff["predicates"]) == set(truth["truth"]) >= {"Open(drawer)", "Grasped(object)", "HandEmpty()"}
    assert truth["truth"]["Closed(drawer)"] and not truth["truth"]["InsideOf(object, drawer)"]  # the initial state
    assert handoff["predicates"]["HandEmpty()"] and truth["truth"]["HandEmpty()"]
