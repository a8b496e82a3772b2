"""A simulated brain-like network: a stand-in for the resting-state fMRI data of arXiv 2406.08272
(v3 adds a nonlinear stochastic network simulation; the fMRI data are not available offline).

Every knob is an interpretation (docs/interpretations.md), recorded via :class:`NetworkSimOptions`):

* nodes on a known 2-D layout: an 8 x 8 grid (``"grid2d"``; W_ij = g exp(-|u_i - u_j|^2 / 2l^2))
  or 4 modules (``"modular"``; edges with probability 0.5 within and 0.05 between modules, the
  nodes placed around 4 module centres);
* W has a zero diagonal and is rescaled to spectral radius rho;
* dynamics x_{t+1} = (1 - a) x_t + a tanh(W x_t + b) + eta_t, b ~ N(0, 0.1^2) fixed,
  eta ~ N(0, s^2);
* tokens are nodes: each example is a window of ``window`` consecutive steps, one token per node
  holding that node's activity in the window.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

LAYOUTS = ("grid2d", "modular")


@dataclasses.dataclass(frozen=True)
class NetworkSimOptions:
    """Knobs of the simulation (defaults: docs/interpretations.md)."""

    layout: str = "grid2d"
    num_nodes: int = 64
    length_scale: float = 1.5
    gain: float = 1.0
    spectral_radius: float = 0.9
    num_modules: int = 4
    p_within: float = 0.5
    p_between: float = 0.05
    alpha: float = 0.5
    bias_std: float = 0.1
    noise_std: float = 0.1
    burn_in: int = 200
    steps: int = 10_000
    window: int = 10

    def __post_init__(self):
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")
        if self.layout == "grid2d" and math.isqrt(self.num_nodes) ** 2 != self.num_nodes:
            raise ValueError(f"layout 'grid2d' needs a square num_nodes, got {self.num_nodes}")
        if self.layout == "modular" and (self.num_modules <= 0 or self.num_nodes % self.num_modules):
            raise ValueError(f"num_nodes={self.num_nodes} must split into num_modules={self.num_modules}")
        for name in ("length_scale", "spectral_radius", "window", "steps"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not 0 < self.alpha <= 1:
            raise ValueError(f"alpha must be in (0, 1], got {self.alpha}")
        if self.steps < self.window:
            raise ValueError(f"steps={self.steps} is shorter than one window ({self.window})")


def layout(options: NetworkSimOptions, rng: np.random.Generator
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Node coordinates ``[N, 2]``, module labels ``[N]`` and connectivity ``W [N, N]``.

    For ``grid2d`` the modules are the 4 quadrants of the grid (used by modularity/segregation).
    """
    o = options
    n = o.num_nodes
    if o.layout == "grid2d":
        side = math.isqrt(n)
        r, c = np.divmod(np.arange(n), side)
        coords = np.stack([c, r], axis=1).astype(np.float64)
        labels = (r >= side / 2).astype(int) * 2 + (c >= side / 2).astype(int)
        d2 = ((coords[:, None] - coords[None]) ** 2).sum(-1)
        w = o.gain * np.exp(-d2 / (2 * o.length_scale ** 2))
    else:
        k = o.num_modules
        labels = np.repeat(np.arange(k), n // k)
        angle = 2 * np.pi * labels / k
        coords = np.stack([np.cos(angle), np.sin(angle)], 1) * 3.0 + 0.5 * rng.standard_normal((n, 2))
        p = np.where(labels[:, None] == labels[None], o.p_within, o.p_between)
        upper = np.triu(rng.random((n, n)) < p, 1)
        w = o.gain * (upper | upper.T).astype(np.float64)
    np.fill_diagonal(w, 0.0)
    radius = np.max(np.abs(np.linalg.eigvals(w)))
    if radius == 0:
        raise ValueError("the sampled connectivity is empty; raise p_within / p_between")
    return coords, labels, w * (o.spectral_radius / radius)


def simulate(options: NetworkSimOptions | None = None, *, seed: int = 0) -> dict[str, np.ndarray]:
    """Run the network and return its ground truth and activity.

    Returns:
      dict with ``coords [N, 2]``, ``modules [N]``, ``weights [N, N]``, ``bias [N]``,
      ``activity [steps, N]`` (after burn-in) and ``fc [N, N]`` (Pearson correlation of the
      activity: the functional connectivity).
    """
    o = options or NetworkSimOptions()
    rng = np.random.default_rng(seed)
    coords, modules, w = layout(o, rng)
    n = o.num_nodes
    b = o.bias_std * rng.standard_normal(n)
    noise = o.noise_std * rng.standard_normal((o.burn_in + o.steps, n))
    x = np.zeros(n)
    out = np.empty((o.steps, n))
    for t in range(o.burn_in + o.steps):  # a recurrence: the loop is over time, not positions
        x = (1 - o.alpha) * x + o.alpha * np.tanh(w @ x + b) + noise[t]
        if t >= o.burn_in:
            out[t - o.burn_in] = x
    return {"coords": coords, "modules": modules, "weights": w, "bias": b, "activity": out,
            "fc": np.corrcoef(out.T)}


def windows(activity: np.ndarray, window: int, *, stride: int | None = None,
            standardize: bool = True) -> np.ndarray:
    """Node tokens ``[num_windows, N, window]`` from ``activity [T, N]``.

    Each example is ``window`` consecutive steps; token i holds node i's activity in it.
    ``standardize`` z-scores each node over time first.
    """
    a = np.asarray(activity, np.float64)
    if a.ndim != 2:
        raise ValueError(f"activity must be [T, N], got shape {a.shape}")
    if standardize:
        a = (a - a.mean(0)) / np.maximum(a.std(0), 1e-12)
    stride = stride or window
    starts = np.arange(0, len(a) - window + 1, stride)
    idx = starts[:, None] + np.arange(window)
    return np.transpose(a[idx], (0, 2, 1)).astype(np.float32)


def random_masks(rng: np.random.Generator, num: int, num_nodes: int, fraction: float) -> np.ndarray:
    """Boolean ``[num, N]`` masks with exactly round(fraction * N) (>= 1) masked nodes each."""
    if not 0 < fraction < 1:
        raise ValueError(f"mask fraction must be in (0, 1), got {fraction}")
    k = max(1, int(round(fraction * num_nodes)))
    order = np.argsort(rng.random((num, num_nodes)), axis=1)
    mask = np.zeros((num, num_nodes), bool)
    np.put_along_axis(mask, order[:, :k], True, axis=1)
    return mask
