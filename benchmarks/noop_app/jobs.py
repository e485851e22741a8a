from django_jobs import handler


@handler("bench.noop")
def noop(payload):
    return None
