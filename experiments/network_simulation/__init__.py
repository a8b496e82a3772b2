"""``experiments.network_simulation``: masked node prediction on a simulated network: does a
learned PE recover the node layout? (arXiv 2406.08272 stand-in) (see ``experiment.py``)."""
from experiments.network_simulation.config import (DECIDED, PRESETS, NetworkSimulationConfig)
from experiments.network_simulation.experiment import (build_model, main, make_loss, masked_inputs,
                                                       r2_masked, run_group)
from experiments.network_simulation.report import (claims, cross_seed_alignment, make_plots)

__all__ = ["build_model", "claims", "cross_seed_alignment", "DECIDED", "main", "make_loss",
           "make_plots", "masked_inputs", "NetworkSimulationConfig", "PRESETS", "r2_masked",
           "run_group"]
