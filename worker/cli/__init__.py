"""Layer 7, the `jobdesk` command line (`python -m jobdesk.cli`), the engine's `make run` and the
demo data for screenshots. The top layer: it may import everything in `worker`.
"""
