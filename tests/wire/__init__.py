"""minikafka/wire: the native protocol's framing and codec."""
