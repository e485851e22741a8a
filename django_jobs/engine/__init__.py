"""The engine's parts that know no feature: the transition an outcome makes (``transition``),
PostgreSQL's statements (``sql``) and how their rows become jobs (``pgrows``)."""
