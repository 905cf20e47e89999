"""Joint-space PID: joint position targets in, joint velocity commands out (numpy in, numpy out).

One :class:`PIDController` drives many joints at once, each with its own gains, velocity limit and angle
wrapping. Its output goes through a :class:`LowPassFilter` ("Let's Handle It", arXiv 2202.11792, Sec. 2.6: fs =
100 Hz, fc = 40 Hz, "to avoid large jumps in output velocity"). Per step, for every joint::

    e     = q_target - q_measured                  (wrapped to [-pi, pi) for continuous joints)
    I    += ki * e * dt                             (conditional integration, clamped: see below)
    D     = -kd * d(q_measured)/dt                  (on the measurement: no kick when the target jumps)
    u     = clip(kp * e + I + D, -limit, +limit)
    qvel  = clip(lowpass(u), -limit, +limit)

Anti-windup, two mechanisms that work together:

- conditional integration (clamping): a joint whose unsaturated output exceeds its velocity limit does not
  integrate an error of the output's sign, since that could only push it deeper into saturation; an error
  of the other sign (the target has been passed) still integrates, so the integral unwinds at once;
- an integral clamp: the integral term (kept in output units, m/s or rad/s, already multiplied by ki) is
  held within +-``integral_limit`` (default: the velocity limit), so that it alone never asks for more than
  the joint can do, whatever happened before.

Gains of Let's Handle It Sec. 2.6 are named presets (:data:`PART_GAINS`); :func:`gains_for` and
:func:`make_robot_pid` lay them out over a :class:`~handleit.types.RobotModel`'s joints. The controller
itself knows nothing of robots.

This runs every control step (100 Hz) inside a behavior tree: the per-step work is a dozen numpy
operations on arrays of a few dozen joints, and everything that can be is precomputed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from handleit.types import RobotModel

FilterMethod = Literal["exponential", "bilinear"]

CONTROL_RATE_HZ = 100.0  # Let's Handle It Sec. 2.6: fs = 100 Hz (the env's control frequency)
CUTOFF_HZ = 40.0  # Let's Handle It Sec. 2.6: fc = 40 Hz


# ---------------------------------------------------------------------------------------------------------
# Low-pass filter


class LowPassFilter:
    """First-order low-pass filter ``RC dy/dt = x - y`` (RC = 1 / (2 pi fc)), discretized per sample.

    Two discretizations (``method``):

    - ``"exponential"`` (default): exponential smoothing ``y += alpha (x - y)`` with
      ``alpha = dt / (RC + dt)`` (backward Euler). Its output is a convex combination of past inputs, so
      the step response never overshoots and an output limit met by the input is met by the output. At
      fs = 100 Hz, fc = 40 Hz: alpha = 0.715; the gain is 0.576 (-4.8 dB) at 40 Hz, 0.56 at 45 Hz,
      0.557 at 50 Hz (its floor, Nyquist), 0.974 at 5 Hz; the -3 dB point lies at 23.4 Hz, not 40 Hz:
      backward Euler moves a cutoff this close to Nyquist (fc / fs = 0.4) down.
    - ``"bilinear"``: Tustin's transform with the cutoff pre-warped, ``K = tan(pi fc / fs)``,
      ``y[n] = K/(1+K) (x[n] + x[n-1]) - (K-1)/(K+1) y[n-1]``. The gain is exactly -3 dB (0.707) at fc and 0
      at Nyquist (0.438 at 45 Hz, 0.977 at 5 Hz); but for fc > fs/4 its pole is negative (-0.51 here), so
      a step overshoots by 12.5% and rings at Nyquist for a few samples. Needs fc < fs / 2.

    Works elementwise on arrays of any (fixed) shape; the state takes the shape of the first input.
    """

    def __init__(self, cutoff_hz: float = CUTOFF_HZ, sample_rate_hz: float = CONTROL_RATE_HZ,
                 method: FilterMethod = "exponential"):
        """``cutoff_hz``: fc [Hz]; ``sample_rate_hz``: fs [Hz], the rate at which :meth:`step` is called."""
        if method not in ("exponential", "bilinear"):
            raise ValueError(f"unknown filter method {method!r}; choose 'exponential' or 'bilinear'")
        if not cutoff_hz > 0 or not sample_rate_hz > 0:
            raise ValueError(f"cutoff_hz and sample_rate_hz must be > 0, got {cutoff_hz} and {sample_rate_hz}")
        self.cutoff_hz, self.method = float(cutoff_hz), method
        self.dt_s = 1.0 / float(sample_rate_hz)
        self._set_coefficients(self.dt_s)
        self._y: np.ndarray | None = None
        self._x_prev: np.ndarray | None = None

    @property
    def sample_rate_hz(self) -> float:
        return 1.0 / self.dt_s

    def _set_coefficients(self, dt_s: float) -> None:
        # y[n] = b0 x[n] + b1 x[n-1] - a1 y[n-1]
        rc_s = 1.0 / (2.0 * math.pi * self.cutoff_hz)
        if self.method == "exponential":
            alpha = dt_s / (rc_s + dt_s)
            self._b0, self._b1, self._a1 = alpha, 0.0, alpha - 1.0
        else:
            if self.cutoff_hz * dt_s >= 0.5:
                raise ValueError(f"bilinear filter needs cutoff {self.cutoff_hz} Hz below Nyquist "
                                 f"({0.5 / dt_s} Hz)")
            k = math.tan(math.pi * self.cutoff_hz * dt_s)  # pre-warped: the gain at fc is exactly 1/sqrt(2)
            self._b0 = self._b1 = k / (1.0 + k)
            self._a1 = (k - 1.0) / (k + 1.0)
        self._coeff_dt_s = dt_s

    def reset(self, y0: np.ndarray | float | None = None) -> None:
        """Forget the past. ``y0``: the output before the next input (e.g. zeros: start from rest); ``None``
        starts from the first input itself (no start-up transient)."""
        self._y = None if y0 is None else np.array(y0, dtype=np.float64)
        self._x_prev = None if y0 is None else self._y.copy()

    def step(self, x: np.ndarray | float, dt_s: float | None = None) -> np.ndarray:
        """Filter one sample ``x``; ``dt_s`` [s]: time since the last sample (default 1 / fs). Returns a new
        array; the filter keeps its own copy of the state."""
        x = np.asarray(x, dtype=np.float64)
        if dt_s is None:
            dt_s = self.dt_s
        if dt_s != self._coeff_dt_s:
            if not dt_s > 0:
                raise ValueError(f"dt_s must be > 0, got {dt_s}")
            self._set_coefficients(float(dt_s))  # an irregular step: the same analog filter at that step
        if self._y is None:
            self._y, self._x_prev = x.copy(), x.copy()
            return x.copy()
        if self._b1 == 0.0:
            y = self._b0 * x - self._a1 * self._y
        else:
            y = self._b0 * x + self._b1 * self._x_prev - self._a1 * self._y
            self._x_prev = x.copy()
        self._y = y
        return y.copy()

    def gain_at(self, frequency_hz: float | np.ndarray) -> np.ndarray:
        """The steady-state amplitude ratio |H| of a sinusoid of ``frequency_hz`` [Hz] at the current rate."""
        w = 2.0 * np.pi * np.asarray(frequency_hz, dtype=np.float64) * self._coeff_dt_s
        z_inv = np.exp(-1j * w)
        return np.abs((self._b0 + self._b1 * z_inv) / (1.0 + self._a1 * z_inv))


# ---------------------------------------------------------------------------------------------------------
# Gains


@dataclass(frozen=True)
class PIDGains:
    """Proportional [1/s], integral [1/s^2] and derivative [1] gains: position error (m or rad) to velocity
    (m/s or rad/s). Scalars for a preset, [n] arrays for a controller's joints."""

    kp: float | np.ndarray
    ki: float | np.ndarray
    kd: float | np.ndarray


# Let's Handle It Sec. 2.6, as published. kd = 0 everywhere: the paper found kd > 0 jittered at 100 Hz. On a
# pure integrator the yaw preset is slow and underdamped (a 1 rad step overshoots by 27% and takes ~16 s into
# a 2% band); the paper does not say whether its gains acted on velocities or on normalized actions (which
# would scale them by the velocity limit), so they are kept as they are and tuned through `presets`.
BASE_TRANSLATION_GAINS = PIDGains(kp=20.0, ki=0.5, kd=0.0)  # base x, y [m]
BASE_HEIGHT_GAINS = PIDGains(kp=20.0, ki=0.5, kd=0.0)  # torso height [m], grouped with translation
BASE_ROTATION_GAINS = PIDGains(kp=0.5, ki=0.2, kd=0.0)  # base yaw [rad]
ARM_GAINS = PIDGains(kp=10.0, ki=2.0, kd=0.0)  # arm joints [rad]
FINGER_GAINS = PIDGains(kp=0.0, ki=0.0, kd=0.0)  # grippers are commanded open/close, not by position

PART_GAINS: Mapping[str, PIDGains] = {
    "base_translation": BASE_TRANSLATION_GAINS,
    "base_height": BASE_HEIGHT_GAINS,
    "base_rotation": BASE_ROTATION_GAINS,
    "arm": ARM_GAINS,
    "finger": FINGER_GAINS,
}


def joint_parts(model: RobotModel, joint_names: Sequence[str] | None = None) -> tuple[str, ...]:
    """The part (a key of :data:`PART_GAINS`) of each joint of ``joint_names`` (default: all the model's
    joints, in its order). ``model.base_joint_names`` are x, y, yaw, height in that order (none for an arm
    bolted in place)."""
    names = model.joint_names if joint_names is None else tuple(joint_names)
    part = {}
    if model.base_joint_names:
        x, y, yaw, height = model.base_joint_names
        part = {x: "base_translation", y: "base_translation", yaw: "base_rotation", height: "base_height"}
    part.update({n: "arm" for joints in model.arm_joint_names.values() for n in joints})
    part.update({n: "finger" for joints in model.finger_joint_names.values() for n in joints})
    unknown = [n for n in names if n not in part]
    if unknown:
        raise ValueError(f"joints {unknown} are in no part of the robot (base, arm or finger joints)")
    return tuple(part[n] for n in names)


def gains_for(model: RobotModel, joint_names: Sequence[str] | None = None,
              presets: Mapping[str, PIDGains] = PART_GAINS) -> PIDGains:
    """Per-joint gain arrays for ``joint_names`` (default: all the model's joints, in its order), each joint
    taking its part's preset from ``presets`` (default :data:`PART_GAINS`, Let's Handle It Sec. 2.6; pass a
    modified copy to tune one part). Finger joints get zero gains."""
    parts = joint_parts(model, joint_names)
    missing = sorted(set(parts) - set(presets))
    if missing:
        raise ValueError(f"presets lack gains for parts {missing}")
    return PIDGains(*(np.array([float(getattr(presets[p], k)) for p in parts]) for k in ("kp", "ki", "kd")))


# ---------------------------------------------------------------------------------------------------------
# Controller


class PIDController:
    """Vectorized PID from joint position targets (m or rad) to joint velocity commands (m/s or rad/s).

    Each of the ``n`` joints has its own gains, velocity limit, integral limit and angle wrapping; scalar
    arguments apply to every joint. See the module docstring for the control law and the anti-windup.
    """

    def __init__(self, kp, ki, kd, velocity_limits=np.inf, continuous=False, *, n_joints: int | None = None,
                 dt_s: float = 1.0 / CONTROL_RATE_HZ, cutoff_hz: float | None = CUTOFF_HZ,
                 filter_method: FilterMethod = "exponential", integral_limits=None, anti_windup: bool = True):
        """
        kp [1/s], ki [1/s^2], kd [1]: gains, scalars or [n] arrays.
        velocity_limits: [n] or scalar, the largest |velocity| commanded (m/s or rad/s); inf: unlimited.
        continuous: [n] bool or scalar; True wraps the joint's error to [-pi, pi) (yaw, continuous joints).
        n_joints: the number of joints, needed only when every other argument is a scalar.
        dt_s: the nominal control period [s] (Let's Handle It: 0.01 s), used when ``step`` gets no ``dt``.
        cutoff_hz: the output low-pass cutoff fc [Hz] (Let's Handle It: 40 Hz) at rate 1 / dt_s; None: no filter.
        filter_method: the filter's discretization, see :class:`LowPassFilter`.
        integral_limits: [n] or scalar bound on |integral term| (m/s or rad/s); default the velocity limits
            (unbounded without anti-windup).
        anti_windup: False turns off conditional integration and the default integral clamp (a plain PID,
            for comparison).
        """
        per_joint = [np.asarray(v, dtype=np.float64) for v in (kp, ki, kd, velocity_limits)]
        per_joint.append(np.asarray(continuous, dtype=bool))
        if integral_limits is not None:
            per_joint.append(np.asarray(integral_limits, dtype=np.float64))
        sizes = {v.size for v in per_joint if v.ndim > 0}
        if n_joints is not None:
            sizes.add(int(n_joints))
        if len(sizes) != 1 or any(v.ndim > 1 for v in per_joint):
            raise ValueError("gains, limits and flags must be scalars or 1-D arrays of one length "
                             f"(sizes {sorted(sizes)}); pass n_joints when all are scalars")
        n = sizes.pop()
        self.n_joints = n
        self.kp, self.ki, self.kd, self.velocity_limits = (np.broadcast_to(v, (n,)).copy() for v in per_joint[:4])
        self.continuous = np.broadcast_to(per_joint[4], (n,)).copy()
        if integral_limits is not None:
            self.integral_limits = np.broadcast_to(per_joint[5], (n,)).copy()
        else:
            self.integral_limits = self.velocity_limits.copy() if anti_windup else np.full(n, np.inf)
        self.anti_windup = bool(anti_windup)
        if not all(np.isfinite(g).all() for g in (self.kp, self.ki, self.kd)):
            raise ValueError("gains must be finite")
        if np.any(~(self.velocity_limits > 0)) or np.any(~(self.integral_limits >= 0)):
            raise ValueError("velocity limits must be > 0 and integral limits >= 0")
        if not dt_s > 0:
            raise ValueError(f"dt_s must be > 0, got {dt_s}")
        self.dt_s = float(dt_s)
        # Precomputed: which joints need wrapping and a derivative term (kd = 0 in every paper preset).
        self._wrap = np.flatnonzero(self.continuous)
        self._use_d = bool(np.any(self.kd != 0))
        self._neg_limits, self._neg_integral_limits = -self.velocity_limits, -self.integral_limits
        self.filter = None if cutoff_hz is None else LowPassFilter(cutoff_hz, 1.0 / self.dt_s, filter_method)
        self.reset()

    def reset(self) -> None:
        """Forget the integral, the last measurement and the filter state; the next output starts from rest
        (the filter's previous output is zero velocity). Call when a new skill takes over the joints."""
        self._integral = np.zeros(self.n_joints)  # ki * integral of e dt, in output units (m/s or rad/s)
        self._q_prev: np.ndarray | None = None
        if self.filter is not None:
            self.filter.reset(np.zeros(self.n_joints))

    @property
    def integral_term(self) -> np.ndarray:
        """The current integral term ki * integral(e dt) per joint (m/s or rad/s); a copy."""
        return self._integral.copy()

    def _wrapped(self, d: np.ndarray) -> np.ndarray:
        if self._wrap.size:
            d[self._wrap] = np.remainder(d[self._wrap] + np.pi, 2.0 * np.pi) - np.pi
        return d

    def step(self, q_target: np.ndarray, q_measured: np.ndarray, dt: float | None = None) -> np.ndarray:
        """One control step: [n] velocity command (m/s or rad/s) toward [n] ``q_target`` from [n]
        ``q_measured`` (m or rad, the same frame: e.g. world x, y, yaw for the base). ``dt`` [s]: time since
        the last step (default ``dt_s``). Raises ``ValueError`` on a wrong shape or NaN / inf input."""
        dt = self.dt_s if dt is None else dt
        if not dt > 0:
            raise ValueError(f"dt must be > 0, got {dt}")
        q_measured = np.asarray(q_measured, dtype=np.float64)
        e = np.asarray(q_target, dtype=np.float64) - q_measured  # a new array: safe to wrap in place
        if e.shape != (self.n_joints,):
            raise ValueError(f"q_target and q_measured must have shape ({self.n_joints},), got "
                             f"{np.shape(q_target)} and {q_measured.shape}")
        if not np.isfinite(e).all():
            # One check for both inputs (inf - inf is NaN too); a NaN would poison the integral for good.
            bad = np.flatnonzero(~np.isfinite(e)).tolist()
            raise ValueError(f"non-finite target or measurement at joints {bad}")
        self._wrapped(e)

        u = self.kp * e
        if self._use_d and self._q_prev is not None:
            u -= self.kd * self._wrapped(q_measured - self._q_prev) / dt
        self._q_prev = q_measured.copy()

        # Conditional integration: hold the integral where the output, with this step's integration,
        # is saturated and the error would push it further the same way.
        integral = self._integral + self.ki * e * dt
        if self.anti_windup:
            u_unsat = u + integral
            winding = (np.abs(u_unsat) > self.velocity_limits) & (e * u_unsat > 0)
            integral = np.where(winding, self._integral, integral)
        self._integral = np.minimum(np.maximum(integral, self._neg_integral_limits), self.integral_limits)

        u = np.minimum(np.maximum(u + self._integral, self._neg_limits), self.velocity_limits)
        if self.filter is not None:
            # Clipped again: the exponential filter cannot leave the limits, the bilinear one can.
            u = np.minimum(np.maximum(self.filter.step(u, dt), self._neg_limits), self.velocity_limits)
        return u


def make_robot_pid(model: RobotModel, joint_names: Sequence[str] | None = None,
                   presets: Mapping[str, PIDGains] = PART_GAINS, cutoff_hz: float | None = CUTOFF_HZ,
                   filter_method: FilterMethod = "exponential") -> PIDController:
    """A :class:`PIDController` over ``joint_names`` of ``model`` (default: all its joints, in its order, so
    that the output is a ``Command.qvel``; fingers get zero gains and so zero velocity): gains from
    ``presets`` per part (:func:`gains_for`), the model's velocity limits, the base yaw wrapped, the
    model's control period.

    The base x/y outputs are world-frame velocities (the joints are world coordinates); the env's base
    velocity is ego-centric: see :func:`handleit.control.actions.world_to_base_velocity`.
    """
    names = model.joint_names if joint_names is None else tuple(joint_names)
    gains = gains_for(model, names, presets)
    yaw = model.base_joint_names[2] if model.base_joint_names else None  # a fixed arm has no yaw to wrap
    return PIDController(gains.kp, gains.ki, gains.kd, velocity_limits=model.velocity_limits[model.index(names)],
                         continuous=np.array([n == yaw for n in names]), n_joints=len(names),
                         dt_s=model.control_dt_s, cutoff_hz=cutoff_hz, filter_method=filter_method)
