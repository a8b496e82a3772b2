from experiments.common import run_cli
from experiments.length_generalization.experiment import main

run_cli(main)
