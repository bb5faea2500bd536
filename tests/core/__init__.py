"""minikafka/core: the sans-IO rules (log, replicas, controller, groups, quotas, records)."""
