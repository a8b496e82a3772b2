from experiments.common import run_cli
from experiments.init_sweep.experiment import main

run_cli(main)
