"""minikafka/server: the node's shell, in process on memory streams (minikafka/testing)."""
