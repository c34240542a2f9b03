"""Giving the operators group the admin's permissions on a few of this app's models, from
a migration (the loader skips modules whose name starts with an underscore). It uses the
historical `apps` only, so the migrations that call it stay as they ran."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.management import create_permissions

Operation = Callable[[Any, Any], None]


def operators_may(grants: dict[str, tuple[str, ...]]) -> tuple[Operation, Operation]:
    """(grant, revoke) for RunPython: {"model": ("view", "add", ...)} given to or taken
    from the operators group (runs/roles.py OPERATOR_ADMIN_PERMISSIONS)."""
    codenames = [f"{action}_{model}" for model, actions in grants.items() for action in actions]

    def permissions(apps: Any) -> Any:
        Permission = apps.get_model("auth", "Permission")
        return Permission.objects.filter(content_type__app_label="runs", codename__in=codenames)

    def grant(apps: Any, schema_editor: Any) -> None:
        # Permissions are normally created after all migrations ran; make them now.
        config = apps.get_app_config("runs")
        config.models_module = True
        create_permissions(config, apps=apps, verbosity=0)
        config.models_module = None
        operators, _ = apps.get_model("auth", "Group").objects.get_or_create(name="operators")
        operators.permissions.add(*permissions(apps))

    def revoke(apps: Any, schema_editor: Any) -> None:
        operators = apps.get_model("auth", "Group").objects.filter(name="operators").first()
        if operators is not None:
            operators.permissions.remove(*permissions(apps))

    return grant, revoke
