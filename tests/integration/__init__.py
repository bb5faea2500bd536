"""Real processes and sockets on 127.0.0.1: conftest.py marks every test here `integration`
(the opt-in long fuzz run, marked `fuzz`, aside)."""
