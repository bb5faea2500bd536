"""minikafka/checker: the experiment checker, its history format and the cluster invariants."""
