"""A goal over predicates -> the behavior tree that reaches it, composed from skills by backchaining.

The postcondition-precondition-action (PPA) expansion of Colledanchise, Almeida and Ögren, "Towards Blended
Reactive Planning and Acting using Behavior Trees" (arXiv 1611.00230): a goal predicate
becomes

    achieve <goal> (Selector)
    ├── <goal>?                       condition, from perception (PerceivePredicates)
    └── <skill>(<entities>) (Sequence)    for each skill with the goal among its effects, in the given order
        ├── achieve <precondition>    each precondition expanded the same way, recursively
        └── <skill>(<entities>) (then its effects awaited)    AwaitEffects over the skill's subtree

and a conjunction is a Sequence of those. Every composite is without memory and the root is ticked at every
control step, so a condition that stops holding (a drawer that slid shut, an object dropped) fails again
and the skill that makes it true runs again: a failed hand-off is repaired by the tree itself.

Two departures from re-checking everything every tick, both shown as decorators in the printed tree:
- a skill's preconditions are checked when it starts, not while it runs (``CheckedAtStart``: the pick closes
  the hand that ``HandEmpty()`` wanted empty; the place opens the hand that ``Grasped(object)`` wanted
  closed). A skill that fails (an object dropped during a carry fails the place's own "object in gripper?")
  has its preconditions checked again on the next tick, and their skills run again;
- a skill that is not preemptible (``SkillSpec.preemptible``) runs to its end once started: its effect's
  condition is not read until then (``AfterSkillEnds``): ``Grasped(object)`` holds as the fingers close,
  before the lift.

Retries are bounded: each grounded skill has a budget of failed runs per episode (``SkillSpec.max_attempts``, or
``max_attempts`` for all), checked by the visible condition ``<skill> attempts left?`` just before the skill. A
run that fails, or that succeeds without its effects being believed, uses an attempt; once all are used the
condition fails, and with it the skill's branch (``failed`` in the printed tree, ``out of attempts`` in the
hand-offs): TidyIntoDrawer test seed 4's open failed 40 times, until the 3,000-step horizon.

Refused, with a :class:`BackchainingError` that names the predicate and the chain that needed it: a
predicate no skill achieves (:class:`NoSkillError`), an expansion that needs a predicate it is already
expanding (:class:`ExpansionCycleError`), and a skill that is declared but has no subtree yet
(:class:`UnbuiltSkillError`, unless placeholders are asked for).

Not handled (the paper resolves such conflicts by moving subtrees): a skill that undoes an earlier goal's condition is
not moved; the re-ticked root then re-achieves that condition, which may loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import py_trees
from py_trees.common import Access, Status

from handleit.predicates import Predicate, format_goal, parse_goal

from .cabinet_nodes import Perceive
from .common import StopAndHold, Tools
from .predicate_nodes import DEFAULT_ENTITY_MASKS, STABLE_TICKS, PerceivePredicates, PredicateHolds
from .skills import SkillSpec


class BackchainingError(ValueError):
    """A goal cannot be composed from the skills given."""


class NoSkillError(BackchainingError):
    """A predicate (goal or precondition) that no skill has among its effects."""


class ExpansionCycleError(BackchainingError):
    """A precondition whose expansion needs a predicate already being expanded above it."""


class UnbuiltSkillError(BackchainingError):
    """The composition needs a skill that is declared (preconditions, effects) but has no subtree yet."""


@dataclass(frozen=True)
class Achiever:
    """A skill grounded on entities, with its preconditions expanded."""

    skill: SkillSpec
    binding: tuple[tuple[str, str], ...]
    preconditions: tuple[Expansion, ...]

    @property
    def signature(self) -> str:
        return self.skill.signature(dict(self.binding))


@dataclass(frozen=True)
class Expansion:
    """A predicate and the skills that make it true (in the order given), each with its expansion."""

    predicate: Predicate
    achievers: tuple[Achiever, ...]


def _chain(chain: tuple[Predicate, ...], p: Predicate) -> str:
    return " <- ".join(str(q) for q in (*chain, p))


def _expand(p: Predicate, skills: tuple[SkillSpec, ...], chain: tuple[Predicate, ...]) -> Expansion:
    if p in chain:
        raise ExpansionCycleError(f"cycle in the expansion: {_chain(chain, p)} (the goal first; each predicate "
                                  "is a precondition of a skill that achieves the one before it)")
    achievers = []
    for skill in skills:
        binding = skill.match(p)
        if binding is None:
            continue
        preconditions = skill.ground(skill.preconditions, binding)
        achievers.append(Achiever(skill, tuple(binding.items()),
                                  tuple(_expand(q, skills, (*chain, p)) for q in preconditions)))
    if not achievers:
        where = "the goal" if not chain else f"needed by {_chain(chain[:-1], chain[-1])}"
        effects = sorted({str(e) for s in skills for e in s.effects})
        raise NoSkillError(f"no skill achieves {p} ({where}); the skills' effects are: {', '.join(effects)}")
    return Expansion(p, tuple(achievers))


def expand_goal(goal: str | tuple[Predicate, ...], skills: tuple[SkillSpec, ...]) -> tuple[Expansion, ...]:
    """The PPA expansion of each of the goal's predicates (``"Open(drawer) & ..."`` or parsed)."""
    goal = parse_goal(goal) if isinstance(goal, str) else tuple(goal)
    return tuple(_expand(p, tuple(skills), ()) for p in goal)


def _walk(expansions):
    for e in expansions:
        yield e
        for a in e.achievers:
            yield from _walk(a.preconditions)


def conditions_of(expansions: tuple[Expansion, ...]) -> tuple[Predicate, ...]:
    """Every predicate a condition node of the composed tree checks, in order, once each."""
    return tuple(dict.fromkeys(e.predicate for e in _walk(expansions)))


def skills_of(expansions: tuple[Expansion, ...]) -> tuple[Achiever, ...]:
    """Every grounded skill of the composed tree, in order, once each."""
    return tuple(dict.fromkeys(a for e in _walk(expansions) for a in e.achievers))


class NotBuilt(py_trees.behaviour.Behaviour):
    """Placeholder of a skill that has no subtree yet: FAILURE, saying so."""

    def __init__(self, signature: str):
        super().__init__(f"{signature}: no subtree yet")

    def update(self) -> Status:
        self.feedback_message = "declared (preconditions, effects), not built"
        return Status.FAILURE


class AwaitEffects(py_trees.decorators.Decorator):
    """Reports a skill's SUCCESS as RUNNING, without ticking it, for up to ``await_ticks`` ticks: until the
    condition above believes its effects (it then stops the skill). Predicates are perceived once per tick,
    before the goal's conditions, and a change is believed only after :data:`STABLE_TICKS` ticks in a row
    (behaviors/predicate_nodes.py): at once, the conditions would still read what was believed before the
    skill acted and run it again. If its effects are still not believed after the wait, the skill runs again:
    a failed attempt (``failed_runs``, logged as ``failed``).
    Logs the skill's start and end in ``tools.skill_events`` (tick, skill, event) and in ``tools.handoffs``
    (those and the predicates perception believed then, and a failure's reason)."""

    def __init__(self, name: str, child: py_trees.behaviour.Behaviour, tools, signature: str,
                 await_ticks: int = STABLE_TICKS + 1):
        super().__init__(name=name, child=child)
        self.tools, self.signature, self.await_ticks = tools, signature, await_ticks
        self.bb = self.attach_blackboard_client(namespace=tools.namespace)
        self.bb.register_key("tick", access=Access.READ)
        self.bb.register_key("predicates", access=Access.READ)
        self._done, self._waited = False, 0
        # Runs that failed, or succeeded without their effects being believed (AttemptsLeft reads it).
        self.failed_runs = 0

    def tick(self):
        if self.status == Status.RUNNING and self._done:
            if self._waited < self.await_ticks:
                self._waited += 1
                self.feedback_message = f"done: waiting for its effects to be believed ({self._waited} ticks)"
                yield self
                return
            # Done, yet its effects are not believed: a failed attempt, and it runs again.
            self._done, self._waited = False, 0
            self.failed_runs += 1
            self._log("failed", failure=f"{self.signature}: its effects not believed {self.await_ticks} ticks "
                                        "after it succeeded")
            self._log("started")
        yield from super().tick()

    def _log(self, event: str, failure: str | None = None) -> None:
        events = getattr(self.tools, "skill_events", None)
        tick = int(self.bb.get("tick")) if self.bb.exists("tick") else -1
        if events is not None:
            events.append((tick, self.signature, event))
        handoffs = getattr(self.tools, "handoffs", None)
        if handoffs is not None:
            # The hand-off: what perception believed of every condition when the skill started or ended, and
            # why it failed (the last failed check's reason).
            values = self.bb.get("predicates") if self.bb.exists("predicates") else None
            entry = {"tick": tick, "skill": self.signature, "event": event,
                     "predicates": {str(p): bool(v.holds) for p, v in (values or {}).items()},
                     "unobserved": [str(p) for p, v in (values or {}).items() if not v.observed]}
            reasons = getattr(self.tools, "failure_reasons", None)
            if failure is not None:
                entry["failure"] = failure
            elif event == "failed" and reasons:
                entry["failure"] = reasons[-1]
            handoffs.append(entry)

    def initialise(self) -> None:
        self._done, self._waited = False, 0
        self._log("started")

    def update(self) -> Status:
        status = self.decorated.status
        if status == Status.SUCCESS:
            if not self._done:
                self._done, self._waited = True, 0
                self._log("succeeded")
            self.feedback_message = "done: waiting for its effects to be believed"
            return Status.RUNNING
        return status

    def terminate(self, new_status: Status) -> None:
        if new_status == Status.FAILURE:
            self.failed_runs += 1
            self._log("failed")
        elif new_status == Status.INVALID and not self._done and self.status != Status.FAILURE:
            self._log("stopped")  # stopped: its condition held before it ended (not a failed run reset)


class AttemptsLeft(py_trees.behaviour.Behaviour):
    """Condition before a skill: SUCCESS while fewer than ``max_attempts`` of its runs (``action``, an
    :class:`AwaitEffects`) have failed this episode, FAILURE after: the composition stops retrying a skill that
    keeps failing. The first FAILURE is logged as the skill's ``out of attempts`` event (``tools.skill_events``,
    ``tools.handoffs`` with the predicates believed then and the last failure's reason) and as a failed check
    (``tools.failures``, ``tools.failure_reasons``); its signature goes to ``tools.out_of_attempts``."""

    def __init__(self, action: AwaitEffects, signature: str, max_attempts: int):
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ValueError(f"{signature}: max_attempts must be an integer >= 1, got {max_attempts!r}")
        super().__init__(f"{signature} attempts left?")
        self.action, self.signature, self.max_attempts = action, signature, max_attempts
        self.logged = False

    def update(self) -> Status:
        used = self.action.failed_runs
        self.feedback_message = f"{used} of {self.max_attempts} attempts failed"
        if used < self.max_attempts:
            return Status.SUCCESS
        if not self.logged:
            self.logged = True
            tools = self.action.tools
            reasons = getattr(tools, "failure_reasons", None)
            last = reasons[-1] if reasons else None
            why = f"{self.name}: {self.feedback_message}" + (f" (last: {last})" if last else "")
            for key, value in (("failures", self.name), ("failure_reasons", why),
                               ("out_of_attempts", self.signature)):
                entries = getattr(tools, key, None)
                if entries is not None:
                    entries.append(value)
            self.action._log("out of attempts", failure=why)
        return Status.FAILURE


def _skill_running(action: py_trees.behaviour.Behaviour) -> bool:
    """Whether a skill's node (an AwaitEffects) has started and not ended yet."""
    return action.status == Status.RUNNING and not getattr(action, "_done", False)


def _skill_started(action: py_trees.behaviour.Behaviour) -> bool:
    """Whether a skill's node has started and not ended, or waits for its effects to be believed."""
    return action.status == Status.RUNNING


class _HeldWhileSkillRuns(py_trees.decorators.Decorator):
    """A condition's subtree not ticked while one of ``actions`` runs (``running(action)``): it reports ``held``
    then (stopping the subtree with it), its feedback ``message`` with the skill's name; the subtree's status
    otherwise."""

    def __init__(self, child: py_trees.behaviour.Behaviour, actions: list[py_trees.behaviour.Behaviour],
                 suffix: str, held: Status, message: str, running):
        super().__init__(name=f"{child.name} ({suffix})", child=child)
        self.actions, self.held, self.message, self.running = list(actions), held, message, running

    def tick(self):
        running = [a for a in self.actions if self.running(a)]
        if running:
            self.feedback_message = self.message.format(skill=running[0].name.split(" (")[0])
            if self.status != self.held:
                self.stop(self.held)
            self.status = self.held
            yield self
            return
        yield from super().tick()

    def update(self) -> Status:
        return self.decorated.status


class CheckedAtStart(_HeldWhileSkillRuns):
    """A skill's precondition (its ``achieve <precondition>`` subtree), checked when the skill starts: while the
    skill runs, SUCCESS without ticking the check (the skill may undo its own precondition: the pick closes
    the hand that HandEmpty() wanted empty). Ticked as usual otherwise."""

    def __init__(self, child: py_trees.behaviour.Behaviour, action: py_trees.behaviour.Behaviour):
        # Also while the skill waits for its effects to be believed: the open skill's HandEmpty() started the
        # release while Open(drawer) was not yet believed (TidyIntoDrawer test seeds 1 and 2).
        super().__init__(child, [action], "at the start", Status.SUCCESS, "held when {skill} started",
                         running=_skill_started)


class AfterSkillEnds(_HeldWhileSkillRuns):
    """A goal's condition that does not stop a skill that runs to its end (``SkillSpec.preemptible=False``):
    FAILURE without reading the condition while one of ``actions`` runs (the selector above goes on ticking
    it), the condition's result otherwise."""

    def __init__(self, child: py_trees.behaviour.Behaviour, actions: list[py_trees.behaviour.Behaviour]):
        super().__init__(child, actions, "once the skill ends", Status.FAILURE, "not read while {skill} runs",
                         running=_skill_running)


class SubtreeStub(py_trees.behaviour.Behaviour):
    """Stands for a built skill's subtree in a tree composed without tools (for printing): FAILURE."""

    def __init__(self, signature: str, doc: str):
        super().__init__(f"{signature}: subtree" + (f" ({doc})" if doc else ""))

    def update(self) -> Status:
        self.feedback_message = "composed without tools: print only"
        return Status.FAILURE


def _action(a: Achiever, tools) -> py_trees.behaviour.Behaviour:
    if a.skill.build is None:
        return NotBuilt(a.signature)
    if tools is None:
        return SubtreeStub(a.signature, a.skill.doc)
    return AwaitEffects(f"{a.signature} (then its effects awaited)", a.skill.build(tools, **dict(a.binding)), tools,
                        a.signature)


class AttemptsStub(py_trees.behaviour.Behaviour):
    """Stands for :class:`AttemptsLeft` in a tree composed without tools (for printing): SUCCESS."""

    def __init__(self, signature: str, max_attempts: int):
        super().__init__(f"{signature} attempts left?")
        self.feedback_message = f"{max_attempts} attempts"

    def update(self) -> Status:
        return Status.SUCCESS


def _ppa(e: Expansion, tools, placeholders: bool, max_attempts: int | None) -> py_trees.behaviour.Behaviour:
    namespace = "/goal" if tools is None else tools.namespace
    achievers, run_to_end = [], []
    for a in e.achievers:
        action = _action(a, tools)
        if not a.skill.preemptible:
            run_to_end.append(action)
        preconditions = [_ppa(q, tools, placeholders, max_attempts) for q in a.preconditions]
        budget = a.skill.max_attempts if max_attempts is None else max_attempts
        attempts = (AttemptsLeft(action, a.signature, budget) if isinstance(action, AwaitEffects)
                    else AttemptsStub(a.signature, budget))
        achievers.append(py_trees.composites.Sequence(a.signature, memory=False, children=[
            *(CheckedAtStart(p, action) for p in preconditions), attempts, action]))
    condition: py_trees.behaviour.Behaviour = PredicateHolds(e.predicate, namespace)
    if run_to_end:
        condition = AfterSkillEnds(condition, run_to_end)
    return py_trees.composites.Selector(f"achieve {e.predicate}", memory=False, children=[condition, *achievers])


def tree_for_goal(goal: str | tuple[Predicate, ...], skills: tuple[SkillSpec, ...], tools: Tools | Any = None,
                  placeholders: bool = False, max_attempts: int | None = None) -> py_trees.behaviour.Behaviour:
    """The PPA tree that reaches ``goal`` with ``skills``: ``goal: <goal>`` (Sequence) over each predicate's
    ``achieve <predicate>`` (Selector). Its conditions read the blackboard key ``predicates`` that
    :class:`~handleit.behaviors.predicate_nodes.PerceivePredicates` writes (see :func:`create_goal_tree` for the
    whole tree with perception).

    Args:
        goal: ``"InsideOf(object, drawer) & Closed(drawer)"`` or parsed predicates.
        skills: the skills to compose, in order of preference.
        tools: the solver's :class:`~handleit.behaviors.common.Tools` (the skills' subtrees use them); None
            composes a tree to print, each built skill's subtree shown as one node.
        placeholders: put a failing "no subtree yet" node in place of each declared skill without a subtree,
            instead of raising :class:`UnbuiltSkillError`.
        max_attempts: failed runs allowed per skill and episode, for every skill (None: each skill's
            ``SkillSpec.max_attempts``); checked by the node ``<skill> attempts left?``.
    Raises:
        NoSkillError, ExpansionCycleError, UnbuiltSkillError (all BackchainingError, a ValueError); ValueError
        for a ``max_attempts`` that is not an integer >= 1.
    """
    if max_attempts is not None and (isinstance(max_attempts, bool) or not isinstance(max_attempts, int)
                                     or max_attempts < 1):
        raise ValueError(f"max_attempts must be an integer >= 1 or None, got {max_attempts!r}")
    goal = parse_goal(goal) if isinstance(goal, str) else tuple(goal)
    expansions = expand_goal(goal, skills)
    unbuilt = [a.signature for a in skills_of(expansions) if a.skill.build is None]
    if unbuilt and not placeholders:
        raise UnbuiltSkillError(f"the tree for {format_goal(goal)} needs skills that have no subtree yet: "
                                f"{', '.join(unbuilt)} (placeholders=True prints the composition anyway)")
    return py_trees.composites.Sequence(f"goal: {format_goal(goal)}", memory=False,
                                        children=[_ppa(e, tools, placeholders, max_attempts) for e in expansions])


def create_goal_tree(goal: str | tuple[Predicate, ...], skills: tuple[SkillSpec, ...], tools: Tools,
                     entity_masks: dict[str, str] | None = None,
                     max_attempts: int | None = None) -> py_trees.behaviour.Behaviour:
    """The whole tree for a solver: perceive (the cabinet trees' handle, front and open state, when an
    entity is the target part), perceive predicates, the PPA tree, and hold still once the goal holds.

        <goal> (Sequence)
        ├── perceive                 handle points, front normal, open state (the cabinet trees' node)
        ├── perceive predicates      every condition of the tree, from perception, into ``predicates``
        ├── goal: <goal>             tree_for_goal
        └── hold still               the goal holds: brake, then keep still where the robot stopped
    """
    goal = parse_goal(goal) if isinstance(goal, str) else tuple(goal)
    goal_tree = tree_for_goal(goal, skills, tools, max_attempts=max_attempts)
    masks = DEFAULT_ENTITY_MASKS if entity_masks is None else entity_masks
    predicates = conditions_of(expand_goal(goal, skills))
    entities = {a for p in predicates for a in p.args}
    perceive = [Perceive("perceive", tools)] if any(masks.get(e) == "target_link" for e in entities) else []
    return py_trees.composites.Sequence(format_goal(goal), memory=False, children=[
        *perceive, PerceivePredicates("perceive predicates", tools, predicates, masks), goal_tree,
        StopAndHold("hold still", tools)])
