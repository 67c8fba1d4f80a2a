"""`python -m gateway.cli`: the same as the `picobot` console script."""

from __future__ import annotations

import sys

from gateway.cli.program import main

sys.exit(main())
