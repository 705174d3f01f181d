"""Layer 2, the store: connections and pools, migrations, the listener, and every SQL statement,
grouped by subject (jobs, pipelines, stats, failures, tokens, fleet, transitions). Every change of
a job's status is written by `jobdesk.store.transitions`. Imports `jobdesk.core` and
`jobdesk.embedded` (to start the embedded database).
"""
