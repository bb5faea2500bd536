"""The whole cluster in simulated time, from one seed (`minikafka sim`).

determinism.py pins what Trio leaves to chance; the rest substitutes a node's edges (clock,
network, disk, threads, process life) and leaves its code as it runs for real.
"""
