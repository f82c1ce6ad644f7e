"""``python as_module.py MODULE ARGS`` runs ``MODULE`` as ``python -m MODULE ARGS`` would.

For ``torchrun --run-path``, which takes a script, not a module: with ``--run-path`` and
``--start-method fork`` torchrun forks each worker from its own process, which runs this
script, instead of starting a fresh interpreter per worker (tests/gpt/test_distributed.py: a
launcher forked from the fork server's template, whose workers import nothing again).
"""

import runpy
import sys

if __name__ == "__main__":
    module = sys.argv[1]
    sys.argv = [module, *sys.argv[2:]]  # runpy sets argv[0] to the module's file, as -m does
    runpy.run_module(module, run_name="__main__", alter_sys=True)
