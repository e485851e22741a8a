"""The engine on PostgreSQL: hand-written statements for the hot paths, and what they need.

``engine`` (``PostgresEngine``), ``statements`` (the named SQL), ``enqueue`` (one round trip
per enqueue), ``rows`` (claimed rows made ``Job`` instances), ``cursor`` (server-side
parameters and prepared statements), ``pooler`` (whether a connection keeps its session),
``listener`` (LISTEN/NOTIFY wake-ups), ``horizon`` (what holds back vacuum), ``replay`` (how
far a standby is behind), ``partitions`` and ``day_drops`` (the history's day partitions), and
``parts``: those the rest of the package uses, as ``DatabaseParts`` (``core/database_parts.py``).
"""
