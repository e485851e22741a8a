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


@handler("bench.cpu")
def cpu(payload):
    """Pure Python for ``ms`` milliseconds of this thread's CPU time (the GIL held throughout,
    but for the interpreter's switches between threads)."""
    import time

    end = time.thread_time() + payload.get("ms", 10) / 1000
    n = 0
    while time.thread_time() < end:
        for i in range(1000):
            n += i * i
    return None
