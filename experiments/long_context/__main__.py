from experiments.common import run_cli
from experiments.long_context.experiment import main

run_cli(main)
