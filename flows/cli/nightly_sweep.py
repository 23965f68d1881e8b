"""The nightly's sweep, in the child process ``flows.nightly.sweep.run_sweep`` starts: ``opi-eval``
(``flows.cli.evaluate``) inside the Prefect context the nightly handed over (``flows.nightly.sweep.nightly_context``),
so its configurations are subflows of the nightly's flow run."""
from flows.cli.start import run_command, start_command


def main() -> None:
    from flows.cli.evaluate import evaluate  # after start_command: Prefect and MLflow read the environment on import
    from flows.nightly.sweep import nightly_context
    from flows.run.config import register_configs

    start_command(early_prefect=True)
    register_configs()
    with nightly_context():
        run_command(evaluate)


if __name__ == "__main__":
    main()
