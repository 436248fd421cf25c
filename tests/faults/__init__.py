"""Fault-injection helpers for tests/e2e/test_faults.py."""
