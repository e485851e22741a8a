from django_jobs import handler, step, workflow


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


@handler("bench.chain")
def chain(payload):
    """One link of a chain of plain jobs: the next link is enqueued when this one completes."""
    from django_jobs import enqueue_after_success

    if payload["left"]:
        enqueue_after_success("bench.chain", {"left": payload["left"] - 1})


def _one(n):
    return n


@workflow("bench.workflow")
def five_steps(steps: int = 5) -> int:
    """A workflow of ``steps`` atomic no-op steps."""
    return sum(step("s", _one, n) for n in range(steps))


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
