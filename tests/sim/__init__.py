"""minikafka/sim: the whole cluster in simulated time."""
