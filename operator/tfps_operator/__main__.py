"""`python -m tfps_operator` runs the operator (same as `tfps operator`)."""

import sys

from .tools.cli import main

sys.exit(main(["operator", *sys.argv[1:]]))
