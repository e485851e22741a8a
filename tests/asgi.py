"""The test project's ASGI application, served by a real ASGI server in
tests/engine/test_asgi_enqueue.py."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
application = get_asgi_application()
