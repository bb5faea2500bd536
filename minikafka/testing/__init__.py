"""minikafka/testing"""
