"""The nightly regression gate: ``gate`` (the Prefect flow and its decision), ``sweep`` (the sweep in a child process,
its configurations subflows of the nightly's flow run, OPI's log lines in Prefect), ``baseline`` (the champion, the
baseline's results, promotion under a lock), and its defaults. ``flows.nightly:main`` is the console script path of
installs before 0.2: ``opi-nightly`` (``flows.cli.nightly``)."""

CHAMPION_TAG, CHAMPION = "opi.baseline", "champion"  # the baseline is the sweep run tagged opi.baseline=champion
DEPLOYMENT = "opi-nightly"


def main() -> None:
    from flows.cli.nightly import main as nightly_main

    nightly_main()
