"""minikafka: a replicated-log mini-broker cluster modelled on Apache Kafka."""

__version__ = "0.1.0"
