"""The engine on MariaDB and MySQL.

``engine`` (``MariaDBEngine``: a claim that reads ids first and locks only those), ``enqueue``
(``enqueue_many`` in one statement), ``locks`` (the ready rows locked in order) and ``schema``
(the indexes MariaDB needs in place of PostgreSQL's partial ones, run by the migrations).
"""
