"""The ``.hydra/*.yaml`` texts of a trial, byte for byte as Hydra writes them, from text kept between trials.

Hydra's ``run_job`` writes ``config.yaml`` (the task's config), ``hydra.yaml`` (the hydra node) and
``overrides.yaml`` with ``OmegaConf.to_yaml``: PyYAML's representer and emitter, pure Python, over every
node of both trees for every job. The trials a worker process runs share all of the hydra node but the
few leaves :meth:`sweeper.run.compose.TrialComposer.split` rewrites, and all of the task's config but
the keys their overrides set. YAML's block style writes a mapping one pair after another, each at its
own indentation, so a pair that did not change has the same text as before: :class:`ChunkedYaml` keeps
those texts and writes only the pairs that changed (NOTE: docs/decisions/0064-per-trial-job-work.md).
The first time it joins a document from kept text (and again for each new set of changed keys) it
checks the result against the whole document's dump; if they differ, it dumps whole documents from
then on.

Kept text and whole documents come from OmegaConf's own dumper. A changed pair, written for every
trial, goes through libyaml's emitter (a third of the time) where both emitters write the same
text: values of numbers, bools, None and strings of printable ASCII without spaces (nowhere to fold
a line, no escapes), in mappings and lists of such. libyaml folds long lines of other strings in
other places than PyYAML, so they take PyYAML's emitter.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

import yaml
from omegaconf import OmegaConf
from omegaconf._utils import get_omega_conf_dumper

if TYPE_CHECKING:
    from sweeper.run.compose import TrialParts

#: A key path in a tree of plain dicts, by the keys' ``str``: ("hydra", "job", "id") is ``tree["hydra"]["job"]["id"]``.
Path = tuple[str, ...]

_Dumper = get_omega_conf_dumper()  # what OmegaConf.to_yaml dumps with


class _LibyamlDumper(getattr(yaml, "CDumper", yaml.Dumper)):  # type: ignore[misc]  # a base chosen at import time
    """OmegaConf's dumper (strings that read as bools or numbers are quoted) on libyaml's emitter."""


_LibyamlDumper.add_representer(str, _Dumper.str_representer)
_HAS_LIBYAML = hasattr(yaml, "CDumper")
#: Strings both emitters write alike: printable ASCII, no whitespace (a simple key is at most 128 characters).
_PLAIN_ASCII = re.compile(r"[!-~]{0,100}\Z")


def to_yaml(cfg: Any) -> str:
    """``OmegaConf.to_yaml(cfg)``, the same text."""
    return dump(OmegaConf.to_container(cfg, resolve=False, enum_to_str=True))


def dump(container: Any) -> str:
    """The YAML text ``OmegaConf.to_yaml`` writes for a plain container."""
    return yaml.dump(container, default_flow_style=False, allow_unicode=True, sort_keys=False, Dumper=_Dumper)


def quick_dump(container: Any) -> str:
    """:func:`dump`'s text, through libyaml where it writes the same (see the module doc)."""
    if not _HAS_LIBYAML or not _libyaml_writes_alike(container):
        return dump(container)
    return yaml.dump(container, default_flow_style=False, allow_unicode=True, sort_keys=False,
                     Dumper=_LibyamlDumper)


def _libyaml_writes_alike(node: Any) -> bool:
    if isinstance(node, str):
        return _PLAIN_ASCII.match(node) is not None
    if node is None or isinstance(node, bool | int | float):
        return True
    if isinstance(node, dict):
        return all(_libyaml_writes_alike(k) and _libyaml_writes_alike(v) for k, v in node.items())
    if isinstance(node, list):
        return all(map(_libyaml_writes_alike, node))
    return False


class _NotAPair(Exception):
    """A pair's text does not start with its mappings' one-line headers (a key YAML writes in two lines)."""


class ChunkedYaml:
    """Dumps a tree of plain dicts again and again where only some pairs change, keeping the other pairs' text.

    The caller's contract: a pair outside a call's ``changed`` paths is the same, key, value and
    position, as it was the first time it was outside them. Per process, for one document (the
    hydra node of a composer's trials, or their task config); not shared between threads.
    """

    def __init__(self) -> None:
        self._kept: dict[Path, str] = {}  # text of the pairs that stay the same
        self._checked: set[frozenset[Path]] = set()  # sets of changed paths whose joined text was checked
        self.whole = False  # True once a joined text differed from the whole dump: dump whole documents

    def dump(self, tree: dict[Any, Any], changed: Collection[Path] | None) -> str:
        """The text of ``dump(tree)``; ``changed``: the paths of the pairs that may differ from the kept ones
        (None: all of them)."""
        if self.whole or changed is None:
            return dump(tree)
        fresh = frozenset(changed)
        holding = {path[:i] for path in fresh for i in range(1, len(path))}  # mappings that hold a changed pair
        try:
            text = "".join(self._pairs(tree, (), (), fresh, holding))
        except _NotAPair:
            text = None
        if fresh not in self._checked:
            self._checked.add(fresh)
            whole = dump(tree)
            if text != whole:
                self.whole, self._kept = True, {}
                return whole
        return text if text is not None else dump(tree)

    def _pairs(self, mapping: dict[Any, Any], at: Path, keys: tuple[Any, ...], fresh: frozenset[Path],
               holding: set[Path]) -> list[str]:
        """The texts of ``mapping``'s pairs; ``at``: its path, ``keys``: the same path by the keys themselves."""
        texts = []
        for key, value in mapping.items():
            path, real = (*at, str(key)), (*keys, key)  # an override names a key by its str (an int key: "1")
            if path in holding and isinstance(value, dict) and value and path not in fresh:
                texts.append(self._header(path, real))
                texts.extend(self._pairs(value, path, real, fresh, holding))
            elif path in fresh or path in holding:
                texts.append(_pair(real, value, quick_dump))
            else:
                if path not in self._kept:
                    self._kept[path] = _pair(real, value, dump)
                texts.append(self._kept[path])
        if not mapping:  # an empty document: "{}"
            texts.append(dump(mapping))
        return texts

    def _header(self, path: Path, keys: tuple[Any, ...]) -> str:
        """The line ``  key:`` that opens the mapping at ``path`` (by its ``keys``) inside its parents'."""
        if path not in self._kept:
            self._kept[path] = _lines(dump(_nested(keys, {"k": 0})), len(keys) - 1, len(keys))
        return self._kept[path]


def _pair(keys: tuple[Any, ...], value: Any, dumper: Callable[[Any], str]) -> str:
    """The text of the pair ``keys[-1]: value`` inside the mappings ``keys[:-1]``, as in the whole document."""
    return _lines(dumper(_nested(keys, value)), len(keys) - 1, None)


def _nested(keys: tuple[Any, ...], value: Any) -> dict[Any, Any]:
    for key in reversed(keys):
        value = {key: value}
    return value


def _lines(text: str, start: int, stop: int | None) -> str:
    """Lines ``start:stop`` of ``text`` (``stop``: ``start + 1`` or None); the lines before ``start``, and the
    one line asked for, must be one-line mapping headers (``key:``). Lines end in ``\n``: PyYAML escapes
    every other line break in a string."""
    at = 0
    for number in range(start if stop is None else stop):
        end = text.find("\n", at)
        if end <= at or text[end - 1] != ":":
            raise _NotAPair(text)
        if number < start:
            at = end + 1
    return text[at:] if stop is None else text[at:end + 1]


class TrialTexts:
    """The ``.hydra/*.yaml`` texts of the trials of one split base (:class:`sweeper.run.compose.TrialParts`)."""

    def __init__(self) -> None:
        self._task, self._hydra = ChunkedYaml(), ChunkedYaml()

    def of(self, trial: TrialParts) -> dict[str, str]:
        """``config.yaml``, ``hydra.yaml`` and ``overrides.yaml`` of ``trial``, as ``run_job`` writes them."""
        task = OmegaConf.to_container(trial.task, resolve=False, enum_to_str=True)
        assert isinstance(task, dict)
        return {"config.yaml": self._task.dump(task, trial.task_changed),
                "hydra.yaml": self._hydra.dump(trial.hydra_tree, trial.hydra_changed),
                "overrides.yaml": quick_dump(trial.hydra_tree["hydra"]["overrides"]["task"])}
