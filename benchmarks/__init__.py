"""Throughput benchmarks: django-jobs against a minimal psycopg loop, in the same run."""
