"""minikafka/faults: the fault model and the fault proxy."""
