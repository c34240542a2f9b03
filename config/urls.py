from django.contrib import admin
from django.urls import include, path

from config import admin as admin_site
from config import health
from runs.web.accounts import LoginView, LogoutView

# An unexpected exception: JSON in the API's error shape under /api/, Django's page
# elsewhere (api/errors.py).
handler500 = "api.errors.server_error"

urlpatterns = [
    # Operations: no login (health for probes; metrics by token or network).
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", health.metrics, name="metrics"),
    # One login page for the whole product: the admin's sends people to ours.
    path("admin/login/", admin_site.login),
    path("admin/", admin.site.urls),
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", LogoutView.as_view(), name="logout"),
    path("reconciliation/", include("reconciliation.urls")),
    path("api/", include("api.urls")),
    path("", include("runs.web.urls")),
]
