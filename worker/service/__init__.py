"""Layer 5, the typed service: `JobService` (what the console and the HTTP API read and do) and
`JobClient` (what a backend does). The front doors above it act through these and write no SQL
of their own.
"""
