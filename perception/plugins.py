"""A registry of plug-ins chosen by name: factories registered in code, or offered by installed packages
through an entry-point group. The grasp predictors and the segmenters are both kinds of plug-in."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable


class PluginRegistry:
    """Factories of one kind of plug-in (``kind`` names it in errors, e.g. "grasp predictor"), by name, plus
    the entry points of ``group`` (loaded, then registered, on first use)."""

    def __init__(self, kind: str, group: str):
        self.kind, self.group = kind, group
        self.factories: dict[str, Callable] = {}

    def register(self, name: str, *, replace: bool = False):
        """Decorator registering a factory (a class or a function) under ``name``. ValueError when ``name``
        is taken by another factory, unless ``replace=True``."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"register {self.kind}: the name must be a non-empty string, got {name!r}")

        def decorator(factory):
            if not callable(factory):
                raise ValueError(f"register {self.kind} {name!r}: expected a class or function, got {factory!r}")
            existing = self.factories.get(name)
            if existing is not None and existing is not factory and not replace:
                raise ValueError(f"{self.kind} {name!r} is already registered ({existing!r}); pass replace=True")
            self.factories[name] = factory
            return factory

        return decorator

    def unregister(self, name: str) -> None:
        """Remove a registered factory (no error if there is none)."""
        self.factories.pop(name, None)

    def entry_points(self) -> dict:
        # Looked up at call time, so tests (and tools) can substitute the discovery.
        return {ep.name: ep for ep in importlib.metadata.entry_points(group=self.group)}

    def available(self) -> list[str]:
        """Names registered here and offered by installed packages (entry points), sorted."""
        return sorted(set(self.factories) | set(self.entry_points()))

    def factory(self, name: str) -> Callable:
        """The factory of ``name``: registered, else loaded from its entry point. ValueError for an unknown
        name, listing the available ones; ImportError naming a plug-in that fails to load."""
        factory = self.factories.get(name)
        if factory is None:
            entry_point = self.entry_points().get(name)
            if entry_point is None:
                raise ValueError(f"unknown {self.kind} {name!r}; available: {', '.join(self.available())}")
            try:
                factory = entry_point.load()
            except Exception as error:  # a broken plug-in: say which one, whatever went wrong inside it
                raise ImportError(f"{self.kind} {name!r}: loading entry point {entry_point.value!r} failed: "
                                  f"{error}") from error
            self.factories[name] = factory
        return factory
