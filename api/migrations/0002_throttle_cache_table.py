"""The table of the database cache (settings.DATABASE_CACHE_TABLE), where the API's
throttle counts live when there is no Redis to hold them (CACHE_URL=db, the default with
a RabbitMQ broker). Made on every database, whichever cache is configured now, so that
changing the broker needs no `createcachetable`. The columns are those Django's
`createcachetable` makes for its DatabaseCache."""

from django.db import migrations

TABLE = "durable_runs_cache"


class Migration(migrations.Migration):
    dependencies = [("api", "0001_drop_plaintext_tokens")]

    operations = [
        migrations.RunSQL(
            f"""
            CREATE TABLE IF NOT EXISTS "{TABLE}" (
                "cache_key" varchar(255) NOT NULL PRIMARY KEY,
                "value" text NOT NULL,
                "expires" timestamp with time zone NOT NULL
            );
            CREATE INDEX IF NOT EXISTS "{TABLE}_expires" ON "{TABLE}" ("expires");
            """,
            f'DROP TABLE IF EXISTS "{TABLE}"',
        )
    ]
