from django_jobs import ConcurrencyLimit, RateLimit, handler


@handler("bench.free")
def free(payload):
    return None


def register_limited() -> None:
    """Registered on demand so the baseline runs with no limit known to the process at all.

    The limits are too wide to refuse anything: what is measured is the bookkeeping."""
    handler("bench.capped", limits=[ConcurrencyLimit(10_000)])(free)
    handler("bench.capped_key", limits=[ConcurrencyLimit(10_000, key="tenant")])(free)
    handler("bench.rated", limits=[RateLimit(1_000_000, per=60)])(free)
