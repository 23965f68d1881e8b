"""Orchestration around the plain ``opi`` library: Hydra commands, Prefect flows and tasks, MLflow tracking.

- ``cli``: the console commands, one thin module each (``opi-eval`` is ``cli.evaluate``);
- ``run``: one configuration as plain steps (config, data, checks, stages, outputs);
- ``orchestration``: Prefect (cached tasks and their keys, the stage cache's files, the temporary server);
- ``tracking``: MLflow (the store, runs, the sweep's parent run and report, the registry);
- ``human``: labelling and annotation round trips; ``nightly``: the regression gate; ``training``: the classifier.

Importing any of it changes nothing in the process: commands set up their environment when they start
(``flows.cli.start``).
"""
