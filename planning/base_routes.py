"""Routes for the mobile base on the floor around a rectangular obstacle (a table seen from its points): the
straight line when it is clear, else the shortest path through the corners of the obstacle grown by the robot's
reach. Plain numpy (world frame, metres); no simulator."""

from __future__ import annotations

import itertools

import numpy as np


def segment_hits_rectangle(a_xy, b_xy, centre_xy, axes, half_extent_m) -> bool:
    """Whether the segment a-b passes through the interior of the rectangle (centre, unit row ``axes`` [2, 2],
    half sizes along them, m): Liang-Barsky clipping in the rectangle's frame."""
    centre = np.asarray(centre_xy, dtype=np.float64)
    a = np.asarray(axes, dtype=np.float64) @ (np.asarray(a_xy, dtype=np.float64) - centre)
    b = np.asarray(axes, dtype=np.float64) @ (np.asarray(b_xy, dtype=np.float64) - centre)
    d = b - a
    t0, t1 = 0.0, 1.0
    for k in range(2):
        for p, q in ((-d[k], a[k] + half_extent_m[k]), (d[k], half_extent_m[k] - a[k])):
            if abs(p) < 1e-12:
                if q <= 0:
                    return False
                continue
            t = q / p
            if p < 0:
                t0 = max(t0, t)
            else:
                t1 = min(t1, t)
            if t0 >= t1 - 1e-9:
                return False
    return True


def route_around_rectangle(start_xy, goal_xy, centre_xy, axes, half_extent_m, margin_m: float) -> list[np.ndarray]:
    """Waypoints (xy, the goal last) from ``start_xy`` to ``goal_xy`` that keep out of the rectangle grown by
    ``margin_m``: the goal alone when the straight line is clear, else via one or two corners of the grown
    rectangle (pushed 2 cm further out), the shortest. A start within half the margin of the rectangle (the
    robot at the table) first leaves straight out past the nearest edge's margin."""
    start = np.asarray(start_xy, dtype=np.float64)[:2]
    goal = np.asarray(goal_xy, dtype=np.float64)[:2]
    axes = np.asarray(axes, dtype=np.float64)
    centre = np.asarray(centre_xy, dtype=np.float64)[:2]
    grown = np.asarray(half_extent_m, dtype=np.float64) + margin_m
    core = np.asarray(half_extent_m, dtype=np.float64) + 0.5 * margin_m  # what a leg may never cross

    def clear(a, b) -> bool:
        return not segment_hits_rectangle(a, b, centre, axes, core)

    prefix = []
    local = axes @ (start - centre)
    if np.all(np.abs(local) < core):  # at the table: first straight out past its nearest edge's margin
        k = int(np.argmin(core - np.abs(local)))
        out = local.copy()
        out[k] = np.sign(local[k] or 1.0) * (grown[k] + 0.02)
        start = centre + out @ axes
        prefix = [start]
    if clear(start, goal):
        return [*prefix, goal]
    corners = [centre + (sx * (grown[0] + 0.02)) * axes[0] + (sy * (grown[1] + 0.02)) * axes[1]
               for sx, sy in ((1, 1), (1, -1), (-1, -1), (-1, 1))]
    best = None
    for n in (1, 2):
        for via in itertools.permutations(corners, n):
            path = [start, *via, goal]
            if all(clear(path[i], path[i + 1]) for i in range(len(path) - 1)):
                length = sum(float(np.linalg.norm(path[i + 1] - path[i])) for i in range(len(path) - 1))
                if best is None or length < best[0]:
                    best = (length, [*via, goal])
        if best is not None:
            break
    return [*prefix, *(best[1] if best is not None else [goal])]


def route_around_rectangles(start_xy, goal_xy, rectangles, margin_m: float) -> list[np.ndarray]:
    """Waypoints (xy, the goal last) from ``start_xy`` to ``goal_xy`` that keep out of every rectangle
    (``(centre_xy, axes [2, 2], half_extent_m [2])``, e.g. a table and a cabinet with its open drawer) grown by
    ``margin_m``: the shortest path through the grown rectangles' corners (pushed 2 cm further out) whose legs
    cross no rectangle grown by half the margin (a visibility graph, Dijkstra). A start within half the margin of
    a rectangle first leaves straight out past its nearest edge's margin, and a goal within half the margin of one
    is reached straight in from its nearest edge's margin. No clear path: the goal alone (the drive's own blocked
    check then says so)."""
    start = np.asarray(start_xy, dtype=np.float64)[:2]
    goal = np.asarray(goal_xy, dtype=np.float64)[:2]
    rects = [(np.asarray(c, dtype=np.float64)[:2], np.asarray(a, dtype=np.float64), np.asarray(h, dtype=np.float64))
             for c, a, h in rectangles]
    if margin_m < 0:
        raise ValueError(f"margin_m must be >= 0, got {margin_m}")
    cores = [(c, a, h + 0.5 * margin_m) for c, a, h in rects]

    def clear(p, q) -> bool:
        return not any(segment_hits_rectangle(p, q, c, a, h) for c, a, h in cores)

    def outside(point):
        """``point`` moved straight out past the nearest edge's margin of each grown rectangle it lies in, and
        the points it went through (none when it lies in none)."""
        steps = []
        for (centre, axes, _), (_, _, core) in zip(rects, cores):
            local = axes @ (point - centre)
            if np.all(np.abs(local) < core):
                k = int(np.argmin(core - np.abs(local)))
                out = local.copy()
                out[k] = np.sign(local[k] or 1.0) * (core[k] + 0.5 * margin_m + 0.02)
                point = centre + out @ axes
                steps.append(point)
        return point, steps

    # A start at a rectangle first leaves straight out past its nearest edge's margin; a goal at one (a
    # stand-off within the margin of a cabinet's corner, TidyIntoDrawer test seed 3) is entered the same way
    # backwards: the route runs to that edge's margin, then straight in to the goal.
    start, prefix = outside(start)
    final = goal
    goal, entry = outside(goal)
    suffix = [*entry[::-1][1:], final] if entry else []
    if clear(start, goal):
        return [*prefix, goal, *suffix]
    nodes = [start, goal]
    for centre, axes, half in rects:
        grown = half + margin_m + 0.02
        nodes += [centre + (sx * grown[0]) * axes[0] + (sy * grown[1]) * axes[1]
                  for sx, sy in ((1, 1), (1, -1), (-1, -1), (-1, 1))]
    # Dijkstra from the start (node 0) to the goal (node 1) over the clear legs.
    n = len(nodes)
    dist, previous, done = np.full(n, np.inf), [-1] * n, np.zeros(n, dtype=bool)
    dist[0] = 0.0
    for _ in range(n):
        i = int(np.argmin(np.where(done, np.inf, dist)))
        if not np.isfinite(dist[i]) or i == 1:
            break
        done[i] = True
        for j in range(n):
            if not done[j] and j != i:
                d = dist[i] + float(np.linalg.norm(nodes[j] - nodes[i]))
                if d < dist[j] and clear(nodes[i], nodes[j]):
                    dist[j], previous[j] = d, i
    if not np.isfinite(dist[1]):
        return [*prefix, final]
    path, i = [], 1
    while i != 0:
        path.append(nodes[i])
        i = previous[i]
    return [*prefix, *path[::-1], *suffix]
