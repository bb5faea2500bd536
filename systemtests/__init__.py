"""The KIP-73 system tests: the KIP's test plan run against real broker processes on 127.0.0.1,
analysed by the PySpark jobs in tools/analysis (`pytest systemtests -m system`)."""
