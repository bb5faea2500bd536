"""minikafka/kafka: the Kafka listener's codec and its API handlers."""
