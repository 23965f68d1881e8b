"""One configuration, start to end, as plain steps every command and callback uses: the config bridge (``config``,
``identity``), its data (``data``), the checks before work (``preflight``), its steps as a table (``pipeline``) and
the steps of more than one stage (``stages``), the Prefect flow around them (``configuration``), its outputs
(``outputs``, ``redaction``) and one ``opi-eval`` job (``job``)."""
