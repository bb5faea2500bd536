"""minikafka/experiment: specs, schedules, nemesis, the run store and the verdicts."""
