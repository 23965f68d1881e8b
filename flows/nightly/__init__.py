"""The nightly regression gate: ``gate`` (the Prefect flow and its decision), ``sweep`` (the sweep in a child process,
its configurations subflows of the nightly's flow run, OPI's log lines in Prefect), ``baseline`` (the champion, the
baseline's results, promotion under a lock), and its defaults. The command is ``opi-nightly`` (``flows.cli.nightly``),
which imports this package; nothing here imports it back."""

CHAMPION_TAG, CHAMPION = "opi.baseline", "champion"  # the baseline is the sweep run tagged opi.baseline=champion
DEPLOYMENT = "opi-nightly"

