"""The system-test harness: profiles, layouts and prediction, clients, tools, runner, verdicts."""
