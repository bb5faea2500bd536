"""minikafka/client"""
