"""Misbehaving solvers for the evaluation-harness tests (loaded by name: ``tests.eval_solvers:raising``)."""

from __future__ import annotations

import os
import time

from handleit.harness.solvers import IdleSolver


class _Raising(IdleSolver):
    name = "raising"

    def step(self, observation):
        raise RuntimeError("this solver always fails")


class _RaisingLater(IdleSolver):
    """Acts for three steps, then raises: the record keeps the three steps and the solver's diagnostics."""
    name = "raising later"

    def reset(self, observation):
        super().reset(observation)
        self.ticks = 0

    def step(self, observation):
        self.ticks += 1
        if self.ticks > 3:
            raise RuntimeError("this solver fails on its fourth tick")
        return super().step(observation)

    def diagnostics(self):
        return {"ticks": self.ticks}


class _Crashing(IdleSolver):
    name = "crashing"

    def step(self, observation):
        os._exit(3)  # the worker process dies, as on a segfault


class _Hanging(IdleSolver):
    name = "hanging"

    def step(self, observation):
        time.sleep(3600)


def raising(task, model):
    return _Raising(model)


def raising_later(task, model):
    return _RaisingLater(model)


def crashing(task, model):
    return _Crashing(model)


def hanging(task, model):
    return _Hanging(model)
