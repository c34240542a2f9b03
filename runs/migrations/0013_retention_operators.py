"""Operators manage retention policies in the admin without being superusers: their
group gets the permissions on the retention models (policies: view, add, change,
delete; their audit and the purges: view). Viewers and submitters get none.

And the default policy every database starts with: payloads kept 30 days after a run
finished, events 90, claims and submission keys (the dedup window) 365."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GRANTS = {
    "retentionpolicy": ("view", "add", "change", "delete"),
    "retentionpolicychange": ("view",),
    "retentionpurge": ("view",),
}


def grant(apps, schema_editor):
    # Permissions are normally created after all migrations ran; make them now.
    config = apps.get_app_config("runs")
    config.models_module = True
    create_permissions(config, apps=apps, verbosity=0)
    config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    operators, _ = Group.objects.get_or_create(name="operators")
    for model, actions in GRANTS.items():
        codenames = [f"{action}_{model}" for action in actions]
        operators.permissions.add(
            *Permission.objects.filter(content_type__app_label="runs", codename__in=codenames)
        )


def default_policy(apps, schema_editor):
    RetentionPolicy = apps.get_model("runs", "RetentionPolicy")
    RetentionPolicy.objects.get_or_create(
        workflow="",
        defaults={"name": "default", "payload_days": 30, "event_days": 90, "dedup_days": 365},
    )


def revoke(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    operators = Group.objects.filter(name="operators").first()
    if operators is not None:
        operators.permissions.remove(
            *Permission.objects.filter(content_type__app_label="runs", codename__in=[
                f"{a}_{m}" for m, actions in GRANTS.items() for a in actions
            ])
        )


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0012_retention"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.RunPython(grant, revoke),
        migrations.RunPython(default_policy, migrations.RunPython.noop),
    ]
