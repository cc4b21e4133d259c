"""The processes' REST serializers, by resource. They parse and render; every write goes
through a service (``processes.registry``, ``processes.lifecycle``, ...), which the viewsets
call.

- :mod:`~processes.serializers.fields`: fields the others share (rows named within the
  user's teams, process types, properties by group);
- :mod:`~processes.serializers.registry`: applications, properties, processes, servers;
- :mod:`~processes.serializers.pipelines`: whole pipelines, templates, instantiation;
- :mod:`~processes.serializers.runs`: the lifecycle's inputs and answers, runs and logs.
"""
