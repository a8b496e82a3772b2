from experiments.common import run_cli
from experiments.network_simulation.experiment import main

run_cli(main)
