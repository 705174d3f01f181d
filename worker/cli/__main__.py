"""`python -m jobdesk.cli`: the `jobdesk` command."""

import sys

from jobdesk.cli.main import main

sys.exit(main())
