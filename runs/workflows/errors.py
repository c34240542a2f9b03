"""The error of a workflow declared wrongly, raised wherever its declaration is checked
(its steps, its input, its schedules) and caught at import time."""


class WorkflowDefinitionError(Exception):
    """A workflow was declared wrongly (caught at import time)."""
