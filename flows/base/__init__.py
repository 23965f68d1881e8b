"""What every part of ``flows`` stands on, importing nothing else of ``flows`` but ``orchestration``: user errors
said in one line (``errors``), the stores a run writes checked before any work (``store_checks``) and what the user
reads while a sweep runs (``progress``). ``run``, ``tracking`` and the commands import these; they import neither."""
