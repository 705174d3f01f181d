"""Layer 3, observation: alerts to admins (apprise) and a worker's Prometheus metrics.
Imports the layers below it.
"""
