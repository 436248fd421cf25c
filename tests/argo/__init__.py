"""Argo Workflows v4.0.5's own code as a test peer: its lint, expressions, types and controller."""
