"""An attempt's life: its start, its lease, its claims, its finish, a batch's items.
Imports only state/ and core/."""
