"""Short names for the configurations of a sweep: each named by what varies in it, the rest said once.

A configuration is described by its parts (retrieval, reader, classifier) and its flat settings (its MLflow params,
``flows.tracking.runs.flatten`` of ``flows.run.identity.effective_settings``). ``short_names`` names each by its
retrieval, the reader and classifier only where they vary in the sweep, and, among configurations whose parts are
the same, the settings that tell them apart (``k=2``); the parts every configuration shares are returned once, for
a header. Names never hold a ``|`` (a Markdown table's separator) and are unique.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

SEPARATOR = " · "
IGNORED_LEAVES = ("_target_",)  # a component's class: it changes with the component, which the name already says
DATA_KEYS = ("dataset.path", "dataset.name")  # the data, said once when every configuration shares it
MAX_VALUE = 32  # characters of a setting's value shown in a name


@dataclass(frozen=True)
class Described:
    retrieval: str  # "kNN", "A-Four", "kNN > cross-encoder"
    reader: str  # "extractive", "gpt-4o"
    classifier: str | None  # "local-clf"; None when the run has no gold relations
    settings: Mapping[str, str]  # the configuration's flat settings (its MLflow params, e.g. {"retriever.k": "2"})


def short_names(configurations: Sequence[Described]) -> tuple[list[str], dict[str, str]]:
    """Each configuration named by what varies in the sweep, in order, e.g. "kNN", "A-Four", "kNN k=2",
    "kNN · gpt-4o" (reader/classifier only where they vary); never a '|' in a name; names unique (the same
    configuration twice gets " (2)"). Second value: the parts every configuration shares, said once in headers,
    e.g. {"reader": "extractive", "classifier": "local-clf"}."""
    varying = [part for part in ("reader", "classifier") if len({getattr(c, part) for c in configurations}) > 1]
    bases = [SEPARATOR.join(str(v) for v in (c.retrieval, *(getattr(c, p) for p in varying)) if v is not None)
             for c in configurations]
    names = [clean(" ".join([base, *settings])) for base, settings in zip(bases, told_apart(configurations, bases))]
    return unique(names), fixed_parts(configurations, varying)


def fixed_parts(configurations: Sequence[Described], varying: Sequence[str]) -> dict[str, str]:
    """The reader, the classifier (when the runs have one) and the data, where every configuration shares them."""
    if not configurations:
        return {}
    first = configurations[0]
    fixed = {part: clean(str(getattr(first, part))) for part in ("reader", "classifier")
             if part not in varying and getattr(first, part) is not None}
    data = [next((c.settings[k] for k in DATA_KEYS if c.settings.get(k) not in (None, "None")), None)
            for c in configurations]
    if data[0] is not None and len(set(data)) == 1:
        fixed["data"] = clean(data[0])
    return fixed


def told_apart(configurations: Sequence[Described], bases: Sequence[str]) -> list[list[str]]:
    """For each configuration, ``leaf=value`` of the settings that differ among the configurations sharing its
    base name (none for a configuration alone in its base)."""
    groups: dict[str, list[int]] = {}
    for i, base in enumerate(bases):
        groups.setdefault(base, []).append(i)
    differing = {i: differing_keys([configurations[j].settings for j in members])
                 for members in groups.values() if len(members) > 1 for i in members}
    labels = leaf_labels([key for keys in differing.values() for key in keys])
    return [[f"{labels[key]}={shown(configurations[i].settings[key])}" for key in differing.get(i, [])
             if key in configurations[i].settings] for i in range(len(configurations))]


def differing_keys(settings: Sequence[Mapping[str, str]]) -> list[str]:
    """The keys (in order of first appearance) whose value is not the same in every one of ``settings``."""
    keys = dict.fromkeys(key for s in settings for key in s)
    return [key for key in keys if key.rsplit(".", 1)[-1] not in IGNORED_LEAVES
            and len({str(s.get(key)) for s in settings}) > 1]


def leaf_labels(keys: Sequence[str]) -> dict[str, str]:
    """Each key's label: its last dotted part, or the shortest dotted suffix no other key shares; a ``name`` leaf
    is said by its parent (``dataset.name`` -> ``dataset``)."""
    keys = list(dict.fromkeys(keys))
    labels = {}
    for key in keys:
        parts = key.split(".")
        for size in range(1, len(parts) + 1):
            suffix = ".".join(parts[-size:])
            if not any(other != key and (other == suffix or other.endswith("." + suffix)) for other in keys):
                break
        labels[key] = parts[-2] if suffix == "name" and len(parts) > 1 else suffix
    return labels


def shown(value: object) -> str:
    """A setting's value as a name shows it: a path by its last part, cut to ``MAX_VALUE`` characters."""
    text = str(value).rstrip("/").rsplit("/", 1)[-1] if "/" in str(value) else str(value)
    return text if len(text) <= MAX_VALUE else text[:MAX_VALUE - 1] + "…"


def clean(name: str) -> str:
    """No ``|`` in a name: it would split a Markdown table's row."""
    return name.replace("|", "/")


def unique(names: Sequence[str]) -> list[str]:
    """Names in order, the second of two equal ones with " (2)", the third " (3)", ..."""
    result: list[str] = []
    for name in names:
        count, candidate = 1, name
        while candidate in result:
            count += 1
            candidate = f"{name} ({count})"
        result.append(candidate)
    return result


def bracketed(name: str) -> tuple[str, dict[str, str]]:
    """A stable name (``flows.tracking.sweeps.configuration_names``: "description [key=value, ...]") as its
    description and the settings in its brackets ({} without)."""
    found = re.fullmatch(r"(.*) \[((?:[\w.]+=.*?)(?:, [\w.]+=.*?)*)\]", name)
    if found is None:
        return name, {}
    return found.group(1), dict(part.split("=", 1) for part in re.split(r", (?=[\w.]+=)", found.group(2)))


def matched(ours: Mapping[str, Mapping[str, str]], theirs: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """Their configuration's name -> ours, for configurations two sweeps named differently only because they hold
    different sets (a sweep adds ``kNN k=8`` beside ``kNN``: its kNN is named ``kNN [retriever.k=4]``). Each side
    maps a stable name to the configuration's settings (its params; from a baseline file, those in its name's
    brackets). Equal names pair; then, among the rest with the same description, one of theirs and one of ours pair
    when they agree on every setting either name's brackets hold (where both sides know it) and neither agrees so
    with another."""
    pairs = {name: name for name in theirs if name in ours}
    left_ours = [name for name in ours if name not in pairs.values()]
    left_theirs = [name for name in theirs if name not in pairs]

    def agree(mine: str, other: str) -> bool:
        (base, keys), (other_base, other_keys) = bracketed(mine), bracketed(other)
        if base != other_base:
            return False
        shared = [key for key in {*keys, *other_keys} if key in ours[mine] and key in theirs[other]]
        return all(str(ours[mine][key]) == str(theirs[other][key]) for key in shared)

    for other in left_theirs:
        candidates = [mine for mine in left_ours if agree(mine, other)]
        if len(candidates) == 1 and [o for o in left_theirs if agree(candidates[0], o)] == [other]:
            pairs[other] = candidates[0]
    return pairs
