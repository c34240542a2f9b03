"""gunicorn's settings for the web process (docker/, and the tests that serve the app as
production does): `gunicorn -c config/gunicorn.py config.wsgi:application`.

The request line is not limited here: gunicorn would answer an overlong one itself, with
an HTML 414 that no API client expects and the API's schema cannot describe. The app
refuses a query string over MAX_QUERY_BYTES in its own words instead
(api/middleware.py), and a reverse proxy in front caps what reaches it anyway.
"""

import os

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
workers = int(os.environ.get("GUNICORN_WORKERS", "3"))
accesslog = "-"
limit_request_line = 0
