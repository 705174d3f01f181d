"""The chaos suite: two real workers and a producer at a fixed rate on a real PostgreSQL, while a
fault is driven (a worker killed, the server restarted, connections cut, slots exhausted, vacuum
held back, long readers, overload); then jobs lost, jobs run twice and the recovery are counted.

    python -m benchmarks.chaos [--quick] [--case NAME ...]

See docs/scale.md, "Chaos", for the cases and the definitions.
"""
