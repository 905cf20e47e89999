"""Per-stage summaries of episodes run by trees composed for goals (issue 19): which skills ran and how each
run ended, where a chain broke, hand-off failures by kind, recoveries, success against the number of skills
that succeeded (after papers/001 Fig. 5), and each predicate perceived at the hand-offs against the env's
ground truth. Input: ``handleit eval`` records (dicts) with ``diagnostics.skill_events``, ``diagnostics.handoffs``
(behaviors/backchaining.py) and ``diagnostics.handoff_truth`` (harness/evaluation.py)."""

from __future__ import annotations

from collections import Counter, defaultdict


def episode_stages(record: dict) -> dict:
    """One episode's chain: the skills in the order they ran, with how each run ended; the skills that
    succeeded; where it broke (the skill running or failed last, and the last failure's reason)."""
    diagnostics = record.get("diagnostics") or {}
    runs: list[list[str]] = []  # [skill, how it ended]
    open_runs: dict[str, int] = {}
    for _, skill, event in diagnostics.get("skill_events", []):
        if event == "started":
            open_runs[skill] = len(runs)
            runs.append([skill, "running"])
        elif skill in open_runs:
            runs[open_runs.pop(skill)][1] = event
    succeeded = [skill for skill, end in runs if end == "succeeded"]
    failures = [h for h in diagnostics.get("handoffs", []) if h["event"] == "failed"]
    # A skill the tree stopped retrying ("<skill> attempts left?" failed, behaviors/backchaining.py).
    given_up = [h for h in diagnostics.get("handoffs", []) if h["event"] == "out of attempts"]
    broke = None
    if not record.get("success"):
        last = runs[-1] if runs else None
        reason = (record.get("failed_node") or "") if not failures else failures[-1].get("failure", "")
        if given_up:
            reason = given_up[-1].get("failure", reason)
        broke = {"skill": last[0] if last else None, "ended": last[1] if last else None, "reason": reason}
    repeated = [skill for skill, n in Counter(skill for skill, _ in runs).items() if n > 1]
    return {"runs": runs, "succeeded": succeeded, "failed_runs": [h["skill"] for h in failures],
            "failure_kinds": [(h["skill"], h.get("failure", "?").split(":")[0]) for h in failures],
            "repeated": repeated, "out_of_attempts": [h["skill"] for h in given_up], "broke": broke}


def predicate_accuracy(records: list[dict]) -> dict[str, list[int]]:
    """Predicate -> [agreements, hand-offs, of them not observed]: perception's belief at each hand-off against
    the env's truth; "not observed": perception could not see what decides it then (a closed drawer's inside)
    and the tree used the value it last saw, or none (False)."""
    table: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for record in records:
        diagnostics = record.get("diagnostics") or {}
        for perceived, truth in zip(diagnostics.get("handoffs", []), diagnostics.get("handoff_truth", [])):
            unobserved = set(perceived.get("unobserved", []))
            for predicate, value in perceived["predicates"].items():
                if predicate in truth["truth"]:
                    table[predicate][0] += int(bool(truth["truth"][predicate]) == value)
                    table[predicate][1] += 1
                    table[predicate][2] += int(predicate in unobserved)
    return dict(table)


def summarize(records: list[dict]) -> str:
    lines = []
    stages = [episode_stages(r) for r in records]
    lines.append("| episode | seed | success | steps | skills run (how each ended) | broke at |")
    lines.append("| --- | --- | --- | --- | --- | --- |")
    for r, s in zip(records, stages):
        runs = ", ".join(f"{skill} {end}" for skill, end in s["runs"]) or "-"
        broke = "-" if s["broke"] is None else f"{s['broke']['skill']} ({s['broke']['reason'][:90]})"
        lines.append(f"| {r.get('index')} | {r.get('seed')} | {r.get('success')} | {r.get('steps')} | {runs} | {broke} |")
    lines.append("")
    by_stage = Counter(len(s["succeeded"]) for s in stages)
    wins_by_stage = Counter(len(s["succeeded"]) for r, s in zip(records, stages) if r.get("success"))
    lines.append("| skills that succeeded in the episode | episodes | of them successful |")
    lines.append("| --- | --- | --- |")
    for n in sorted(by_stage):
        lines.append(f"| {n} | {by_stage[n]} | {wins_by_stage[n]} |")
    lines.append("")
    kinds = Counter(k for s in stages for k in s["failure_kinds"])
    lines.append("Hand-off failures by kind (skill: failed check): " + (
        ", ".join(f"{skill}: {node} x{n}" for (skill, node), n in kinds.most_common()) or "none"))
    given_up = Counter(skill for s in stages for skill in s["out_of_attempts"])
    lines.append("Skills out of attempts (the tree gave them up): " + (
        ", ".join(f"{skill} x{n}" for skill, n in given_up.most_common()) or "none"))
    repaired = sum(1 for r, s in zip(records, stages) if r.get("success") and (s["failed_runs"] or s["repeated"]))
    troubled = sum(1 for s in stages if s["failed_runs"] or s["repeated"])
    lines.append(f"Episodes with a failed or repeated skill: {troubled}; of them repaired (successful): {repaired}")
    lines.append("")
    lines.append("| predicate (perceived at hand-offs) | agrees with ground truth | hand-offs | of them not observed |")
    lines.append("| --- | --- | --- | --- |")
    for predicate, (agree, n, unobserved) in sorted(predicate_accuracy(records).items()):
        lines.append(f"| {predicate} | {agree}/{n} = {agree / n:.2f} | {n} | {unobserved} |")
    return "\n".join(lines)
