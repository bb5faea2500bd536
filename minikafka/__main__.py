"""`python -m minikafka ...` is the `minikafka` command."""

from minikafka.cli import main

main()
