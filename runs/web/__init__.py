"""The operator pages of the runs app: views (GET) and actions (POST) over the read
side in queries.py, the submit form, login and logout, the layout's context, the
template tags and the run timeline. The domain (models, states, events, history, the
engine, workflows, tasks) never imports this package."""
