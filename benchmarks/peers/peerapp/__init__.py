"""The jobs every system runs: a no-op that, when asked to, notes when it started."""
