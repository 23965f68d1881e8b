"""The console commands, one thin module each: ``opi-eval`` (``evaluate``), ``opi-report``, ``opi-nightly``,
``opi-label``, ``opi-annotate``, ``opi-train-classifier``. Each sets its process up first (``start``), then imports
and runs its work."""
