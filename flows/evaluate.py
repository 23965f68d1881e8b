"""Forwarding alias: ``python -m flows.evaluate`` and console scripts installed before 0.2 (``flows.evaluate:main``)
run ``opi-eval`` (``flows.cli.evaluate``)."""
from flows.cli.evaluate import main

if __name__ == "__main__":
    main()
