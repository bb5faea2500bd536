"""minikafka/testing: the kit itself (load, checker, seeds, run folder, fuzz, pytest plugin)."""
