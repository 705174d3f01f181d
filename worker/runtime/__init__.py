"""Layer 4, the runtime: the worker split by role (its lifecycle, claim pump, execution, outcomes
and database link), the fleet supervisor, the processor registry, the scheduler, retention and the
metrics rollup loop. Imports the layers below it, never a front door.
"""
