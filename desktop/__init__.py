"""The jobdesk console (PySide6 on qasync). It talks to the database only through `worker`."""
