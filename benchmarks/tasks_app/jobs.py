from django_jobs import handler


@handler("bench.plain_noop")
def plain_noop(payload):
    return None
