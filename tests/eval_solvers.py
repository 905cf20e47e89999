"""Misbehaving solvers for the evaluation-harness tests (loaded by name: ``tests.eval_solvers:raising``)."""

from __future__ import annotations

import os
import time

from handleit.harness.solvers import IdleSolver


class _Raising(IdleSolver):
    name = "raising"

    def step(self, observation):
        raise RuntimeError("this solver always fails")


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


def crashing(task, model):
    return _Crashing(model)


def hanging(task, model):
    return _Hanging(model)
