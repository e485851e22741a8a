"""Support for the chaos suite (the test_chaos_*.py files beside it): the run ledger that checks
exactly-once modulo recorded lost attempts, a throwaway PostgreSQL cluster, a TCP proxy the tests
cut, and the sizes read from the environment (CI runs small; ``CHAOS_JOBS=20000
CHAOS_WORKERS=8`` by hand)."""
