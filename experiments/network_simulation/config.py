"""``experiments.network_simulation``: the experiment's config
(:class:`NetworkSimulationConfig`) and its presets."""
from __future__ import annotations

import dataclasses

from experiments.common import described
from posjax.models import TransformerConfig
from posjax.training import TrainConfig


def _model_template() -> TransformerConfig:
    """The encoder (arXiv 2406.08272's network model: post-LN, a GELU after the MLP, the
    learned PE added before every block, one head); ``input_dim`` (window + 1), ``max_len`` (the
    number of nodes) and ``pe`` / ``pe_options`` (the σ label) are set from the data and the cell."""
    return TransformerConfig(num_layers=4, d_model=64, num_heads=1, d_ff=256, pe="none",
                             pre_norm=False, pe_every_layer=True, mlp_trailing_activation=True)


def _train_template() -> TrainConfig:
    return TrainConfig(steps=20_000, batch_size=32, optimizer="adam", learning_rate=1e-4,
                       progress=False)


# Library fields the experiment decides (data and cell); --set of another value is refused.
DECIDED = {"model": ("pe", "pe_options", "input_dim", "max_len"),
           "train": ("log_every", "checkpoint_every")}


@dataclasses.dataclass(frozen=True)
class NetworkSimulationConfig:
    """Settings of the experiment (the simulation's other knobs keep the defaults of
    ``NetworkSimOptions``). ``seeds`` is a count (seeds 0..seeds-1). ``model`` / ``train``:
    the library configs, set dotted (``--set model.d_model=32 train.learning_rate=3e-3``)."""

    sigmas: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.8, 1.0, 1.2, 1.5, 1.8, 2.0)
    baselines: tuple[str, ...] = ("none",)
    seeds: int = 5
    layout: str = "grid2d"
    sim_steps: int = 10_000
    sim_seed: int = 0
    mask_fraction: float = 0.15
    test_fraction: float = 0.2          # last fraction of the windows (in time) is the test set
    mask_token: str = described("zeros+flag", "masked_inputs: content zeroed plus a 0/1 flag; "
                                "docs/interpretations.md")
    model: TransformerConfig = dataclasses.field(default_factory=_model_template)
    train: TrainConfig = dataclasses.field(default_factory=_train_template)

    def __post_init__(self):
        if self.seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {self.seeds}")
        if any(s <= 0 for s in self.sigmas):
            raise ValueError(f"every σ must be positive, got {self.sigmas}")
        if self.layout not in ("grid2d", "modular"):
            raise ValueError(f"layout must be grid2d or modular, got {self.layout!r}")
        if self.train.steps <= 0 or self.sim_steps <= 0:
            raise ValueError("train.steps and sim_steps must be positive")
        if not 0 < self.mask_fraction < 1 or not 0 < self.test_fraction < 1:
            raise ValueError("mask_fraction and test_fraction must be in (0, 1)")
        for part, template in (("model", _model_template()), ("train", _train_template())):
            for name in DECIDED[part]:
                if getattr(getattr(self, part), name) != getattr(template, name):
                    raise ValueError(f"{part}.{name} is decided by the experiment (data, σ "
                                     f"label, train.steps); it cannot be set")


PRESETS = {
    # 2-core CPU: small model, 5 seeds in ensembles
    "quick": NetworkSimulationConfig(
        sigmas=(0.05, 0.2, 1.0, 2.0), seeds=5, sim_steps=3000,
        model=dataclasses.replace(_model_template(), d_model=32, num_layers=2, d_ff=128),
        train=dataclasses.replace(_train_template(), learning_rate=3e-3, steps=600)),
    # one H200 in <= 8 min: the paper-sized model (d = 64, 4 layers) and grid, 5 seeds
    "gpu": NetworkSimulationConfig(train=dataclasses.replace(_train_template(), steps=5000)),
    "paper": NetworkSimulationConfig(),
}
