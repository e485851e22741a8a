from django_jobs import handler


@handler("bench.noop")
def noop(payload):
    return None


@handler("bench.sleep")
def sleep(payload):
    import time

    time.sleep(payload["seconds"])


@handler("bench.async_noop")
async def async_noop(payload):
    return None
