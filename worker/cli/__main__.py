"""`python -m worker.cli`: the `jobdesk` command."""

import sys

from worker.cli.main import main

sys.exit(main())
