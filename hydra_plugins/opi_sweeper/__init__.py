"""``hydra/sweeper: opi`` (the default in ``conf/config.yaml``): Hydra's basic sweep, composing each job once.

Hydra's basic sweeper composes every job of a batch to check it before launching any, and its launcher then
composes each job again: 0.2-0.3 s a compose, twice per configuration. This sweeper, written on Hydra's public
plugin interfaces (``Sweeper``, ``Plugins``, ``ConfigLoader``), expands the sweep as the basic sweeper does
(``hydra.sweeper.params`` first, then the command line; a key given twice keeps its last value) -- or a union of such
sweeps (``hydra.sweeper.grids``, as scikit-learn's ``ParameterGrid`` over a list of dicts) -- composes every
job once to check it, so a bad job still stops the sweep before the first one runs (one line, exit 2), and gives the
launcher -- any launcher: basic, joblib, submitit -- a config loader that hands back the configurations it composed.
The jobs OPI's preflight already composed to check them before the sweep's parent run opens (``keep_composed``)
are not composed again: each job composes once in all.
"""

import copy
import itertools
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.errors import HydraException
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext
from omegaconf import Container, DictConfig, OmegaConf, open_dict

from opi.memory import MEMORY

log = logging.getLogger("opi")
COMPOSED = "composed jobs"  # the process memory's kind


def keep_composed(master: DictConfig, job: Sequence[str], composed: DictConfig) -> None:
    """``job`` of the sweep over ``master`` as composed (by a check before the sweep), for the sweeper to launch."""
    MEMORY.recall(COMPOSED, (id(master), tuple(job)), lambda: (master, composed))


def composed_before(master: DictConfig, job: Sequence[str]) -> Optional[DictConfig]:
    key = (id(master), tuple(job))
    if not MEMORY.holds(COMPOSED, key):
        return None
    kept_master, composed = MEMORY.recall(COMPOSED, key, lambda: (None, None))
    return composed if kept_master is master else None  # the same sweep, not one whose master had that id


def extended(composed: DictConfig, extra: Sequence[str]) -> DictConfig:
    """``composed`` (a job's composition) with the value overrides ``extra`` (``key=value`` of keys it holds, not a
    config group) added, as composing the job's overrides plus ``extra`` gives, without composing again: what a
    racing sweep's rounds add to each of its jobs (0.2-0.35 s a compose saved per round job)."""
    config = copy.deepcopy(composed)
    overrides = OverridesParser.create().parse_overrides(list(extra))
    with open_dict(config):
        for override in overrides:
            if override.is_sweep_override() or override.is_add() or override.is_delete() \
                    or override.is_force_add() or override.key_or_group.startswith("hydra.") \
                    or isinstance(OmegaConf.select(config, override.key_or_group, default=config), Container):
                raise ValueError(f"only a value override of a key the job holds can be added, got {override.input_line}")
            OmegaConf.update(config, override.key_or_group, override.value(), merge=False)
            config.hydra.overrides.task.append(override.input_line)
        dirname = config.hydra.job.config.override_dirname
        lines = sorted(line for line in config.hydra.overrides.task
                       if line.split("=", 1)[0].lstrip("+~") not in dirname.exclude_keys)
        config.hydra.job.override_dirname = re.sub("=", dirname.kv_sep, dirname.item_sep.join(lines))
    OmegaConf.copy_cache(from_config=composed, to_config=config)
    return config


def forget_composed() -> None:
    MEMORY.forget(COMPOSED)


@dataclass(frozen=True)
class Sweep:
    """The jobs of a sweep (each a list of overrides) and the swept keys that a later value replaced."""

    jobs: list[list[str]]
    replaced: dict  # key -> (the earlier value, the value that replaced it)


def expand(params: dict[str, str], arguments: Sequence[str], config_loader: Any = None,
           grids: Optional[Sequence[dict[str, str]]] = None) -> Sweep:
    """The basic sweeper's Cartesian product of ``params`` (``hydra.sweeper.params``) and ``arguments`` (the
    command line); ``config_loader`` expands ``glob()`` over a config group. With ``grids``
    (``hydra.sweeper.grids``), the union of one such product per grid, each over ``params`` with the grid's keys
    added: the seven retrievers x ``retriever.k`` in one grid, the combinations in another. A job two grids both
    hold runs once, where the first grid puts it."""
    if not grids:
        return product(params, arguments, config_loader)
    jobs, seen, replaced = [], set(), {}
    for grid in grids:
        sweep = product({**params, **grid}, arguments, config_loader)
        replaced.update(sweep.replaced)
        for job in sweep.jobs:
            if frozenset(job) not in seen:
                seen.add(frozenset(job))
                jobs.append(job)
    return Sweep(jobs, replaced)


def sweep_of(config: DictConfig, config_loader: Any = None) -> Sweep:
    """The jobs a multirun of ``config`` (composed with its ``hydra`` node) launches."""
    sweeper = config.hydra.sweeper
    return expand(dict(sweeper.get("params") or {}), list(config.hydra.overrides.task), config_loader,
                  grids_of(sweeper))


def grids_of(sweeper: Any) -> list[dict[str, str]]:
    """``hydra.sweeper.grids`` with each value as the override's text (``retriever.k: 4`` -> ``4``, null -> null)."""
    def text(value: Any) -> str:
        return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)

    return [{str(key): text(value) for key, value in grid.items()} for grid in sweeper.get("grids") or []]


def product(params: dict[str, str], arguments: Sequence[str], config_loader: Any = None) -> Sweep:
    parser = OverridesParser.create(config_loader=config_loader)
    values: dict[str, list[str]] = {}
    given: dict[str, str] = {}
    replaced: dict[str, tuple[str, str]] = {}
    for override in parser.parse_overrides([*(f"{k}={v}" for k, v in params.items()), *arguments]):
        key = override.get_key_element()
        if override.is_sweep_override():
            if not override.is_discrete_sweep():
                raise HydraException(f"the opi sweeper does not support sweep type {override.value_type.name}")
            choices = [f"{key}={value}" for value in override.sweep_string_iterator()]
        else:
            choices = [f"{key}={override.get_value_element_as_str()}"]
        text = override.input_line or choices[0]
        if key in values and len(values[key]) > 1:
            replaced[key] = (given[key], text)
        values[key], given[key] = choices, text
    return Sweep([list(job) for job in itertools.product(*values.values())], replaced)


class ComposedOnce:
    """A config loader that hands the launcher each configuration the sweeper composed (once), and passes
    everything else to Hydra's own."""

    def __init__(self, loader: Any, master: DictConfig):
        self.loader = loader
        self.master = master
        self.checked: dict[tuple[str, ...], DictConfig] = {}

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        kept = self.checked.pop(tuple(sweep_overrides), None) if master_config is self.master else None
        return kept if kept is not None else self.loader.load_sweep_config(master_config, sweep_overrides)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "loader":  # copies (a launcher's worker processes) are built bare
            raise AttributeError(name)
        return getattr(self.loader, name)


class ComposeOnceSweeper(Sweeper):
    def __init__(self, max_batch_size: Optional[int] = None, params: Optional[dict[str, str]] = None,
                 grids: Optional[list[dict[str, str]]] = None):
        self.max_batch_size = max_batch_size
        self.params = dict(params or {})
        self.grids = grids_of({"grids": grids})

    def setup(self, *, hydra_context: HydraContext, task_function: Any, config: DictConfig) -> None:
        self.config = config
        self.loader = ComposedOnce(hydra_context.config_loader, config)
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=HydraContext(config_loader=self.loader, callbacks=hydra_context.callbacks),
            task_function=task_function, config=config)

    def sweep(self, arguments: list[str]) -> Any:
        jobs = expand(self.params, arguments, self.loader.loader, self.grids).jobs
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        self.returns, self.launched = [], 0
        if OmegaConf.select(self.config, "sweep.strategy") == "race":
            from flows.run.race_sweep import race  # OPI's racing strategy: rounds of these jobs

            race(self, jobs)
        else:
            self.launch(jobs)
        forget_composed()
        return self.returns

    def launch(self, jobs: list[list[str]]) -> list[Any]:
        """Run ``jobs`` (in batches of ``max_batch_size``); their JobReturns."""
        size = self.max_batch_size or len(jobs) or 1
        done = []
        for batch in (jobs[i:i + size] for i in range(0, len(jobs), size)):
            self.check(batch)
            results = self.launcher.launch(batch, initial_job_idx=self.launched)
            for result in results:
                _ = result.return_value  # a failed job raises here, as with Hydra's basic sweeper
            self.launched += len(batch)
            self.returns.append(results)
            done.extend(results)
        return done

    def check(self, batch: list[list[str]]) -> None:
        for overrides in batch:
            try:
                composed = composed_before(self.config, overrides)
                self.loader.checked[tuple(overrides)] = composed if composed is not None else \
                    self.loader.loader.load_sweep_config(self.config, list(overrides))
            except HydraException as err:  # a mistyped value in a sweep: exit 2, as every other user error
                log.error("cannot compose the configuration %s: %s", " ".join(overrides), err)
                raise SystemExit(2) from None


@dataclass
class ComposeOnceSweeperConf:
    _target_: str = "hydra_plugins.opi_sweeper.ComposeOnceSweeper"
    max_batch_size: Optional[int] = None
    params: Optional[dict[str, str]] = None
    grids: Optional[list[dict[str, Any]]] = None  # a union of sweeps, each crossed with params and the command line


ConfigStore.instance().store(group="hydra/sweeper", name="opi", node=ComposeOnceSweeperConf, provider="opi")
