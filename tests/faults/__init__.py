"""Fault-injection helpers for tests/test_faults.py."""
