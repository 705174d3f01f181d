"""`python -m benchmarks.chaos`: see benchmarks/chaos/__init__.py."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.chaos.suite import main

sys.exit(main())
