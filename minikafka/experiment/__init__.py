"""Fault-injection experiments: the history format, the checker and the cluster invariants."""
