"""One configuration, start to end, as plain steps every command and callback uses: the config bridge (``config``,
``identity``), its data (``data``), the checks before work (``preflight``, ``store_checks``), the stage sequence
(``stages``), the Prefect flow around it (``configuration``), its outputs (``outputs``) and what the user reads
(``progress``, ``errors``)."""
