"""minikafka/core"""
