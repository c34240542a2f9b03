"""Remove DRF's authtoken table: its keys were API tokens in clear, and knox (hashed,
expiring) replaced it. Those tokens stop working; each client needs a new one from
`createoperator NAME --token`.

Removing rest_framework.authtoken from INSTALLED_APPS leaves its table and rows behind,
so they are dropped here, with the app's migration records (were the app ever installed
again, its migrations would recreate the table) and its content type and permissions.
Nothing to do on a database that never had it. Not reversible in content: the old keys
are gone for good, which is the point.
"""

from django.db import migrations


def forget_authtoken(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    # Through the ORM so that the permissions (and admin log entries) that point at the
    # content type go with it.
    ContentType.objects.using(schema_editor.connection.alias).filter(app_label="authtoken").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("admin", "0003_logentry_add_action_flag_choices"),
        ("knox", "0009_extend_authtoken_field"),
    ]

    operations = [
        migrations.RunSQL(
            [
                "DROP TABLE IF EXISTS authtoken_token",
                "DELETE FROM django_migrations WHERE app = 'authtoken'",
            ],
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.RunPython(forget_authtoken, migrations.RunPython.noop),
    ]
