"""minikafka/client: the library's connection, cluster client, consumer offsets."""
