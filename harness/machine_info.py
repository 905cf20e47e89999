"""The processor an episode ran on, for its record.

Lockstep episodes repeat step for step on one machine, but not across machines: MoveBucket episodes measured on
one 2-core AMD EPYC and re-run on another (CPU family 26) differed by a few steps in 9 of 21, and in outcome in
4 (docs/benchmarks.md, issue 14). Library kernels chosen by CPU round differently. The records say which CPU ran
each episode, so that two runs can be told apart.
"""

from __future__ import annotations

import platform
from functools import lru_cache
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")


@lru_cache(maxsize=1)
def cpu_description() -> str:
    """e.g. ``"AMD EPYC (family 26, model 2, avx512f)"``; off Linux, what ``platform`` knows."""
    fields: dict[str, str] = {}
    try:
        for line in CPUINFO.read_text().splitlines():
            if not line.strip():
                break  # the first processor is enough
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or platform.machine() or "unknown CPU"
    details = [f"family {fields['cpu family']}"] if "cpu family" in fields else []
    if "model" in fields:
        details.append(f"model {fields['model']}")
    flags = fields.get("flags", "").split()
    details += [flag for flag in ("avx512f", "avx2") if flag in flags][:1]
    return f"{name} ({', '.join(details)})" if details else name
