"""The predicate vocabulary shared by goals, skills and evaluations (handleit.predicates)."""

import pytest

from handleit.predicates import Predicate, format_goal, parse_goal, parse_predicate


def test_parse_round_trips_a_goal():
    goal = parse_goal("InsideOf(object, drawer) & Closed(drawer)")
    assert goal == (Predicate("InsideOf", ("object", "drawer")), Predicate("Closed", ("drawer",)))
    assert format_goal(goal) == "InsideOf(object, drawer) & Closed(drawer)"
    assert parse_goal("Open(drawer) and not Grasped(object)")[1] == Predicate("Grasped", ("object",), negated=True)
    assert str(parse_predicate("HandEmpty()")) == "HandEmpty()"


@pytest.mark.parametrize("text, problem", [
    ("Opened(drawer)", "unknown predicate 'Opened'"),
    ("InsideOf(object)", "InsideOf takes 2 argument"),
    ("Open drawer", "cannot parse predicate"),
    ("Open(draw-er)", "bad entity name"),
    ("", "empty goal"),
    ("Open(drawer) & not Open(drawer)", "contradictory goal"),
])
def test_bad_goals_are_named(text, problem):
    with pytest.raises(ValueError, match=problem):
        parse_goal(text)
