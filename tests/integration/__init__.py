"""Real processes on 127.0.0.1: every test here is marked `integration` (conftest.py)."""
