"""The jobdesk console (PySide6 on qasync), imported as `jobdesk.console`. It talks to the database
only through jobdesk's service layer."""

if __name__ != "jobdesk.console":  # the checkout's folder imported by its old name
    raise ImportError(f"the console is imported as `jobdesk.console`, not `{__name__}` "
                      "(the old names `worker` and `desktop` were dropped in 0.2.0; see the changelog)")
