"""Logical predicates over object states: the vocabulary that goals, skills and evaluations share.

After iGibson 2.0's logical states (arXiv 2108.03272, Sec. 3: Open, InsideOf, OnTopOf, Grasped, ...): a goal
is a conjunction of ground predicates such as ``InsideOf(object, drawer) & Closed(drawer)``; a skill states
its preconditions and effects in the same terms. This module holds only the names and their parsing (a
shared type, the bottom layer). Who evaluates a predicate differs by layer: perception evaluates it from
point clouds and the robot's own state (what a tree may read); an env evaluates it on simulator state
(ground truth, for evaluation only).

Entities are named by role, not by simulator id: ``drawer`` (the articulated part to open or close),
``object`` (the rigid object to move), ``table`` (the support surface).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# name -> number of arguments
PREDICATE_ARITY: dict[str, int] = {
    "Open": 1,  # Open(part): the part is open (opened past a threshold of its range)
    "Closed": 1,  # Closed(part): the part is closed (within a small threshold of its closed limit)
    "Grasped": 1,  # Grasped(object): the object is held in the gripper
    "HandEmpty": 0,  # HandEmpty(): the gripper holds nothing
    "InsideOf": 2,  # InsideOf(object, part): the object lies inside the part (a drawer's box)
    "OnTopOf": 2,  # OnTopOf(object, surface): the object rests on the surface
}
ENTITY_NAMES = ("drawer", "object", "table")

_ATOM = re.compile(r"^\s*(not\s+|!\s*)?([A-Za-z]+)\s*\(\s*([^()]*)\)\s*$")


@dataclass(frozen=True)
class Predicate:
    """A ground predicate, e.g. ``InsideOf(object, drawer)``; ``negated`` for its negation."""

    name: str
    args: tuple[str, ...] = ()
    negated: bool = False

    def __post_init__(self) -> None:
        if self.name not in PREDICATE_ARITY:
            raise ValueError(f"unknown predicate {self.name!r}: known are {', '.join(sorted(PREDICATE_ARITY))}")
        if len(self.args) != PREDICATE_ARITY[self.name]:
            raise ValueError(f"{self.name} takes {PREDICATE_ARITY[self.name]} argument(s), got {len(self.args)}: "
                             f"{self.args}")
        for arg in self.args:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", arg):
                raise ValueError(f"bad entity name {arg!r} in {self.name}: letters, digits and '_' only")

    def negate(self) -> Predicate:
        return Predicate(self.name, self.args, not self.negated)

    def __str__(self) -> str:
        atom = f"{self.name}({', '.join(self.args)})"
        return f"not {atom}" if self.negated else atom


def parse_predicate(text: str) -> Predicate:
    """``"InsideOf(object, drawer)"`` or ``"not Grasped(object)"`` -> :class:`Predicate`."""
    match = _ATOM.match(text)
    if match is None:
        raise ValueError(f"cannot parse predicate {text!r}: write NAME(arg, ...), optionally preceded by 'not'")
    negated, name, args = match.groups()
    return Predicate(name, tuple(a.strip() for a in args.split(",") if a.strip()), negated=bool(negated))


def parse_goal(text: str) -> tuple[Predicate, ...]:
    """A conjunction, ``"InsideOf(object, drawer) & Closed(drawer)"`` (``&`` or ``and``) -> its predicates."""
    parts = [p for p in re.split(r"\s*&\s*|\s+and\s+", text.strip()) if p]
    if not parts:
        raise ValueError("empty goal: give at least one predicate, e.g. 'Open(drawer)'")
    goal = tuple(parse_predicate(p) for p in parts)
    for p in goal:
        if p.negate() in goal:
            raise ValueError(f"contradictory goal: both {p} and {p.negate()}")
    return goal


def format_goal(goal: tuple[Predicate, ...]) -> str:
    return " & ".join(str(p) for p in goal)
