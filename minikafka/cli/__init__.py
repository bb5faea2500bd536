"""The `minikafka` command line (click)."""

from minikafka.cli.main import main

__all__ = ["main"]
