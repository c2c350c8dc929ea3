"""`python -m minitrain ...`: the same command line as `minitrain ...` (minitrain/cli.py), without a venv on PATH."""

import sys

from minitrain.cli import main

sys.exit(main())
