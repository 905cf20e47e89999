"""Small helpers shared by the procedural object generators (cabinets, chairs, buckets): seeded sampling
whose values round-trip through meta.json, and number formatting that keeps generated files byte-identical."""

from __future__ import annotations

import numpy as np


def uniform(rng: np.random.Generator, low: float, high: float) -> float:
    # Rounded to 0.1 mm / 1e-4 so that meta.json stays readable and specs compare exactly.
    return round(float(rng.uniform(low, high)), 4)


def choice(rng: np.random.Generator, options: list[str] | tuple[str, ...]) -> str:
    return options[int(rng.integers(len(options)))]


def jittered_rgba(rng: np.random.Generator, rgb: tuple[float, ...]) -> tuple[float, float, float, float]:
    """``rgb`` with each channel moved by up to +-0.04, opaque."""
    jittered = np.clip(np.asarray(rgb) + rng.uniform(-0.04, 0.04, size=3), 0.0, 1.0)
    return (*(round(float(c), 3) for c in jittered), 1.0)


def fmt(*values: float) -> str:
    """Numbers for a URDF attribute. Fixed precision keeps files byte-identical across runs; "+ 0.0" turns
    -0.0 into 0."""
    return " ".join(f"{round(float(v), 7) + 0.0:.7g}" for v in values)
