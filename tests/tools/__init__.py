"""minikafka.tools (tools/): the analysis, the reassignment tool, perf and the demo."""
