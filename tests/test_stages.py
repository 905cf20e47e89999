"""Per-stage summaries of composed-tree episodes (harness/stages.py) from synthetic records."""

from __future__ import annotations

from handleit.harness.stages import episode_stages, predicate_accuracy, summarize


def _record(index, success, events, handoffs, truth, failed_node=None):
    return {"index": index, "seed": index, "success": success, "steps": 100 * (index + 1), "failed_node": failed_node,
            "diagnostics": {"skill_events": events, "handoffs": handoffs, "handoff_truth": truth}}


def _handoff(tick, skill, event, predicates, failure=None):
    entry = {"tick": tick, "skill": skill, "event": event, "predicates": predicates}
    if failure:
        entry["failure"] = failure
    return entry


REPAIRED = _record(0, True, [
    [0, "open(drawer)", "started"], [300, "open(drawer)", "succeeded"], [320, "pick(object)", "started"],
    [700, "pick(object)", "failed"], [701, "pick(object)", "started"], [900, "pick(object)", "succeeded"]],
    [_handoff(0, "open(drawer)", "started", {"Open(drawer)": False}),
     {**_handoff(300, "open(drawer)", "succeeded", {"Open(drawer)": False}), "unobserved": ["Open(drawer)"]},
     _handoff(700, "pick(object)", "failed", {"Open(drawer)": True}, "lifted?: object still down")],
    [{"tick": 0, "skill": "open(drawer)", "event": "started", "truth": {"Open(drawer)": False}},
     {"tick": 300, "skill": "open(drawer)", "event": "succeeded", "truth": {"Open(drawer)": True}},
     {"tick": 700, "skill": "pick(object)", "event": "failed", "truth": {"Open(drawer)": True}}])
BROKEN = _record(1, False, [[0, "open(drawer)", "started"], [250, "open(drawer)", "succeeded"],
                            [270, "place inside(object, drawer)", "started"]],
                 [_handoff(0, "open(drawer)", "started", {"Open(drawer)": False})],
                 [{"tick": 0, "skill": "open(drawer)", "event": "started", "truth": {"Open(drawer)": False}}],
                 failed_node="drive to the drawer in time?")


def test_stages_name_the_runs_the_break_and_the_repairs():
    stages = episode_stages(REPAIRED)
    assert stages["runs"] == [["open(drawer)", "succeeded"], ["pick(object)", "failed"], ["pick(object)", "succeeded"]]
    assert stages["failure_kinds"] == [("pick(object)", "lifted?")] and stages["repeated"] == ["pick(object)"]
    assert stages["broke"] is None
    broken = episode_stages(BROKEN)
    assert broken["broke"] == {"skill": "place inside(object, drawer)", "ended": "running",
                               "reason": "drive to the drawer in time?"}


def test_predicate_accuracy_counts_agreements_at_hand_offs():
    # Wrong once, where perception could not see the drawer (the value remembered).
    assert predicate_accuracy([REPAIRED, BROKEN]) == {"Open(drawer)": [3, 4, 1]}


def test_summary_tables():
    text = summarize([REPAIRED, BROKEN])
    assert "| 0 | 0 | True | 100 | open(drawer) succeeded, pick(object) failed, pick(object) succeeded | - |" in text
    assert "pick(object): lifted? x1" in text
    assert "Episodes with a failed or repeated skill: 1; of them repaired (successful): 1" in text
    assert "| Open(drawer) | 3/4 = 0.75 | 4 | 1 |" in text
    assert "| 2 | 1 | 1 |" in text and "| 1 | 1 | 0 |" in text  # success against the skills that succeeded


def test_a_skill_out_of_attempts_is_where_the_chain_broke():
    events = [[0, "open(drawer)", "started"], [100, "open(drawer)", "failed"], [101, "open(drawer)", "started"],
              [200, "open(drawer)", "failed"], [201, "open(drawer)", "out of attempts"]]
    handoffs = [_handoff(100, "open(drawer)", "failed", {}, "plan grasp: no grasp fits"),
                _handoff(200, "open(drawer)", "failed", {}, "plan grasp: no grasp fits"),
                _handoff(201, "open(drawer)", "out of attempts", {},
                         "open(drawer) attempts left?: 2 of 2 attempts failed (last: plan grasp: no grasp fits)")]
    record = _record(2, False, events, handoffs, [], failed_node="open(drawer) attempts left?")
    stages = episode_stages(record)
    assert stages["runs"] == [["open(drawer)", "failed"], ["open(drawer)", "failed"]]  # no third run
    assert stages["out_of_attempts"] == ["open(drawer)"]
    assert stages["broke"]["reason"].startswith("open(drawer) attempts left?: 2 of 2 attempts failed")
    assert "Skills out of attempts (the tree gave them up): open(drawer) x1" in summarize([record])
    assert "Skills out of attempts (the tree gave them up): none" in summarize([REPAIRED])
