"""Initial states of the long-horizon tasks, written as predicates and turned into what the samplers set.

As iGibson 2.0 samples a task's initial state from logical predicates ("iGibson 2.0: Object-Centric Simulation
for Robot Learning of Everyday Household Tasks", arXiv 2108.03272, Sec. 3: each predicate has a sampler that
makes it true), an episode starts from a conjunction such as ``InsideOf(object, drawer) & Closed(drawer)``.
Here a predicate fills one slot of the scene: where the object starts (on the table or inside the drawer's
box) and how far the drawer is open (an interval of its range, or one given fraction). Predicates not named
keep the task's default for their slot. The env places the object and sets the joint, lets physics settle and
checks that every predicate holds (``envs/long_horizon.py``).

Pure Python: no simulator.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from handleit.predicates import Predicate, format_goal, parse_goal, parse_predicate

from .predicate_truth import CLOSED_MAX_M, OPEN_MIN_FRACTION

# The predicates a sampler can make true, by slot. HandEmpty and "not Grasped" hold at every start: the robot
# begins at rest with its gripper open.
DRAWER_PREDICATES = ("Closed(drawer)", "not Closed(drawer)", "Open(drawer)", "not Open(drawer)")
OBJECT_PREDICATES = ("OnTopOf(object, table)", "InsideOf(object, drawer)")
HAND_PREDICATES = ("HandEmpty()", "not Grasped(object)")
SUPPORTED_INITIAL_PREDICATES = DRAWER_PREDICATES + OBJECT_PREDICATES + HAND_PREDICATES
OBJECT_SUPPORT = {"OnTopOf(object, table)": "table", "InsideOf(object, drawer)": "drawer"}
# A sampled "not Closed" or "not Open" drawer keeps this far (fraction of its range) from the threshold it must
# not cross, so that settling cannot move it across.
THRESHOLD_MARGIN_FRACTION = 0.02


@dataclass(frozen=True)
class InitialState:
    """What the samplers make: ``predicates`` (all of them, checked after physics settles), the object's
    support ``object_on`` ("table" or "drawer") and the drawer's open fraction, drawn uniformly from
    ``drawer_fraction`` (low, high; low == high for one value)."""

    predicates: tuple[Predicate, ...]
    object_on: str
    drawer_fraction: tuple[float, float]

    def __str__(self) -> str:
        return format_goal(self.predicates)


def as_predicates(spec) -> tuple[Predicate, ...]:
    """``spec``: a conjunction as text (``"Open(drawer) & OnTopOf(object, table)"``), one Predicate, or an
    iterable of Predicates or texts -> the predicates; ``ValueError`` for anything else."""
    if isinstance(spec, str):
        return parse_goal(spec)
    if isinstance(spec, Predicate):
        return (spec,)
    if isinstance(spec, Iterable):
        predicates = tuple(p if isinstance(p, Predicate) else parse_predicate(p) if isinstance(p, str) else None
                           for p in spec)
        if None in predicates or not predicates:
            raise ValueError(f"initial state {spec!r}: give predicates as text or Predicate objects, at least one")
        for p in predicates:
            if p.negate() in predicates:
                raise ValueError(f"contradictory initial state: both {p} and {p.negate()}")
        return predicates
    raise ValueError(f"initial state {spec!r}: give a conjunction of predicates as text, e.g. "
                     "'InsideOf(object, drawer) & Closed(drawer)', or a sequence of Predicate")


def _drawer_interval(predicates: tuple[Predicate, ...], travel_m: float) -> tuple[float, float]:
    closed_fraction = CLOSED_MAX_M / travel_m
    margin = THRESHOLD_MARGIN_FRACTION
    intervals = {
        "Closed(drawer)": (0.0, 0.0),  # at the closed limit
        "not Closed(drawer)": (min(1.0, closed_fraction + margin), 1.0),
        "Open(drawer)": (OPEN_MIN_FRACTION + margin / 2, 1.0),
        "not Open(drawer)": (0.0, OPEN_MIN_FRACTION - margin),
    }
    low, high = 0.0, 1.0
    for p in predicates:
        a, b = intervals[str(p)]
        low, high = max(low, a), min(high, b)
    if low > high:
        raise ValueError(f"no drawer position makes {format_goal(predicates)} true: Closed(drawer) is within "
                         f"{CLOSED_MAX_M} m of the closed limit, Open(drawer) from {OPEN_MIN_FRACTION:.0%} of the "
                         "range")
    return low, high


def initial_state(requested, default, travel_m: float, drawer_open_fraction: float | None = None) -> InitialState:
    """The initial state of an episode: ``requested`` predicates (text or Predicates, None for none) over the
    task's ``default`` ones, slot by slot; the drawer's travel ``travel_m`` (m) turns Closed's 1 cm into a
    fraction. ``drawer_open_fraction`` (in [0, 1]) sets the drawer there: it must agree with the drawer's
    predicates, and without a requested drawer predicate it replaces the default's (a half-open drawer:
    ``drawer_open_fraction=0.5``, which is ``not Closed(drawer) & not Open(drawer)``). ``ValueError`` names
    an unknown predicate, one no sampler makes, a contradiction or a fraction out of place."""
    requested = () if requested is None else as_predicates(requested)
    default = as_predicates(default)
    for p in requested + default:
        if str(p) not in SUPPORTED_INITIAL_PREDICATES:
            raise ValueError(f"no sampler makes the initial predicate {p}; initial states are made of "
                             f"{', '.join(SUPPORTED_INITIAL_PREDICATES)}")
    if drawer_open_fraction is not None:
        f = float(drawer_open_fraction)
        if not 0.0 <= f <= 1.0:
            raise ValueError(f"drawer_open_fraction must be in [0, 1] (of the drawer's range), got "
                             f"{drawer_open_fraction!r}")

    def slot(names):
        chosen = [p for p in requested if str(p) in names]
        return chosen if chosen else [p for p in default if str(p) in names]

    drawer = [p for p in requested if str(p) in DRAWER_PREDICATES]
    if not drawer and drawer_open_fraction is None:
        drawer = [p for p in default if str(p) in DRAWER_PREDICATES]
    objects = slot(OBJECT_PREDICATES)
    supports = sorted({OBJECT_SUPPORT[str(p)] for p in objects})
    if len(supports) != 1:
        raise ValueError(f"the object must start in one place: name one of {', '.join(OBJECT_PREDICATES)} "
                         f"(got {format_goal(tuple(objects)) if objects else 'none'})")
    hand = slot(HAND_PREDICATES)
    predicates = tuple(dict.fromkeys([*objects, *drawer, *hand]))
    for p in predicates:
        if p.negate() in predicates:
            raise ValueError(f"contradictory initial state: both {p} and {p.negate()}")
    low, high = _drawer_interval(tuple(drawer), travel_m)
    if drawer_open_fraction is not None:
        f = float(drawer_open_fraction)
        holds = {str(p) for p in _drawer_predicates_of(f, travel_m)}  # exact thresholds: the given value is kept
        wrong = [str(p) for p in drawer if str(p) not in holds]
        if wrong:
            raise ValueError(f"drawer_open_fraction {f} contradicts {', '.join(wrong)}: Closed(drawer) holds up to "
                             f"{CLOSED_MAX_M / travel_m:.3f} of this drawer's range ({travel_m:.3f} m), Open(drawer) "
                             f"from {OPEN_MIN_FRACTION}; a half-open drawer is 'not Closed(drawer) & not Open(drawer)'")
        low = high = f
    if drawer_open_fraction is not None and not drawer:  # name what the fraction makes, for the check
        predicates += tuple(_drawer_predicates_of(low, travel_m))
    return InitialState(predicates, supports[0], (low, high))


def _drawer_predicates_of(fraction: float, travel_m: float) -> list[Predicate]:
    """The drawer predicates that hold at ``fraction`` of a range of ``travel_m``."""
    closed = fraction * travel_m <= CLOSED_MAX_M
    opened = fraction >= OPEN_MIN_FRACTION
    return [Predicate("Closed", ("drawer",), negated=not closed), Predicate("Open", ("drawer",), negated=not opened)]
