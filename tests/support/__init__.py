"""Shared test fixtures and helpers (S3 test endpoint, child processes)."""
