"""The checker: what a history of sends, polls and final reads (`history.py`), and the nodes'
replica samples, say went wrong (`anomalies.py`, `invariants.py`), in Jepsen's words.

Its own floor, above only `minikafka.errors`: the experiments judge their runs with it
(minikafka/experiment/verdict.py) and the test kit checks a cluster's clients with it
(minikafka/testing/checker.py), and neither has to import the other to do so.
"""
