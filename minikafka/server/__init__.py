"""minikafka/server"""
