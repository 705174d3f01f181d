"""`python -m worker.cli`: the `jobdesk` command."""

import sys

from worker.cli.commands import main

sys.exit(main())
