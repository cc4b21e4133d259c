"""What the pages read, one function per page: each takes rows the user may see (``scope``
decides that, in the view) and returns what the page shows, so that a view parses, calls one
selector or service and renders.

- :mod:`~processes.selectors.dashboard`: the jobs the user may see, their last and next
  runs, queues and failures, and the last 24 hours;
- :mod:`~processes.selectors.jobs`: one job's page.
"""
