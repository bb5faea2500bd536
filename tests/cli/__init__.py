"""minikafka/cli: the command line, in process (click's CliRunner) or on a simulated cluster."""
