"""The unit and integration tests, a folder per floor of the house (docs/tests.md#the-layout).

Every folder is a package, so that two floors may each have a test_log.py: pytest's default
(prepend) import mode puts the checkout's root on sys.path and imports tests.core.test_log."""
