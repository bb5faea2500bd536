"""minikafka.cluster (cluster/): the local-cluster launcher, its files, ports and identity."""
