import os

from django.core.wsgi import get_wsgi_application

from config import tracing

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Before the handler loads its middleware (Django's instrumentation adds its own); in
# each web process: gunicorn imports this module in a worker, after its fork.
tracing.setup("web")
application = get_wsgi_application()
