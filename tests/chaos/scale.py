"""Sizes of the chaos runs: small by default (CI), bigger through environment variables."""

from __future__ import annotations

import os


def env_int(name: str, default: int) -> int:
    """A positive integer from the environment, or ``default``; a bad value is an error."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    value = int(raw)
    if value < 0:
        raise ValueError(f"{name} must be a non-negative integer, not {raw!r}")
    return value


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    return float(raw) if raw else default


def report(title: str, figures: dict[str, object]) -> str:
    """One line of figures, printed by each chaos test (shown with ``pytest -s``) and kept in
    tests/artifacts/chaos-figures.log for the docs."""
    from tests.settings import BASE

    line = f"{title}: " + ", ".join(f"{key}={value}" for key, value in figures.items())
    print(line)
    with open(BASE / "artifacts" / "chaos-figures.log", "a") as log:
        log.write(line + "\n")
    return line
