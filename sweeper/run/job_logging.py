"""Hydra's job logging for each trial, built directly when only the log file's name is new.

Why: Hydra's ``configure_log`` runs ``logging.config.dictConfig`` (under Hydra's target
authorization) for every job, which for a trial that takes milliseconds is a sizeable part of its
time, only to point the file handler at the new job's ``<output_dir>/<job name>.log``
(NOTE: docs/decisions/0064-per-trial-job-work.md).

What: :func:`configure_job_log` takes Hydra's ``configure_log`` for the first job of a process and
for every job whose resolved ``hydra.job_logging`` (and ``hydra.verbose``) differs from all those
configured before in anything but the file handlers' file names. Otherwise, where the config uses
only what is understood here (formatters by format, date format, style and validate; handlers of
class ``logging.StreamHandler`` on ``ext://sys.stdout`` or ``ext://sys.stderr`` and
``logging.FileHandler``, with a formatter and a level; the root logger's level and handlers; no
filters, no named loggers, not incremental), it does what ``dictConfig`` does with that config, in
the same order: close every handler, build the formatters, the handlers by name (a file handler
opens its new file), set every existing logger's ``disabled`` to ``disable_existing_loggers``, set
the root logger's level and handlers; then ``hydra.verbose``'s levels, as ``configure_log`` does.
The classes are the standard library's own, which Hydra's authorization allowed for the same
config when it configured it first.
"""

from __future__ import annotations

import logging
import logging.config
import re
import sys
from collections.abc import Mapping
from typing import Any, cast

from hydra.core.utils import configure_log
from omegaconf import Container, DictConfig, ListConfig, Node, OmegaConf

from sweeper.run.interpolation import value_of

#: The keys of a handler's config understood here, by class (besides class, formatter and level).
_HANDLER_ARGS = {"logging.StreamHandler": frozenset({"stream"}),
                 "logging.FileHandler": frozenset({"filename", "mode", "encoding", "delay", "errors"})}
_HANDLER_CLASSES: dict[str, type[logging.Handler]] = {"logging.StreamHandler": logging.StreamHandler,
                                                      "logging.FileHandler": logging.FileHandler}
_FORMATTER_KEYS = frozenset({"format", "datefmt", "style", "validate"})
_STREAMS = {"ext://sys.stdout": "stdout", "ext://sys.stderr": "stderr"}
#: A string dictConfig would convert (``ext://``, ``cfg://``): understood only as a handler's stream.
_CONVERTED = re.compile(r"^[a-z]+://")

#: The configs (without their file names) Hydra's configure_log applied in this process, with hydra.verbose.
_configured: set[Any] = set()


def configure_job_log(log_config: DictConfig | None, verbose: Any) -> None:
    """Configure a job's logging as ``hydra.core.utils.configure_log(log_config, verbose)`` does."""
    conf = _resolved(log_config) if log_config is not None else None
    key = _key(conf, verbose)
    if key is None or key not in _configured:
        configure_log(log_config, verbose)  # type: ignore[arg-type]  # None is what Hydra's own default path takes
        if key is not None:
            _configured.add(key)
        return
    assert isinstance(conf, dict)
    _apply(cast(dict[str, Any], conf))
    _apply_verbose(verbose)


class _PlainForm:
    """A read-only logging config as plain containers, and where its interpolations are."""

    def __init__(self, config: DictConfig) -> None:
        self.config = config
        self.template = OmegaConf.to_container(config, resolve=False)
        self.interpolated: list[tuple[tuple[Any, ...], Container, Any]] = []  # (path, parent, key)
        self.whole = not self._find(config, ())  # an interpolated container: OmegaConf.to_container each time

    def _find(self, node: Container, path: tuple[Any, ...]) -> bool:
        """Note the interpolated leaves under ``node``; False if a container under it is an interpolation."""
        keys = range(len(node)) if isinstance(node, ListConfig) else list(cast(DictConfig, node).keys())
        for key in keys:
            child = node._get_node(key)  # noqa: SLF001 - OmegaConf has no public call for a child's node
            if not isinstance(child, Node):
                return False
            interpolated = child._is_interpolation()  # noqa: SLF001 - what to_container asks
            if isinstance(child, Container):
                if interpolated or (not child._is_none() and not self._find(child, (*path, key))):  # noqa: SLF001 - as above
                    return False
            elif interpolated:
                self.interpolated.append(((*path, key), node, key))
        return True

    def resolved(self) -> Any:
        """``OmegaConf.to_container(config, resolve=True)``."""
        if self.whole:
            return OmegaConf.to_container(self.config, resolve=True)
        conf = _plain_copy(self.template)
        for path, parent, key in self.interpolated:
            at = conf
            for step in path[:-1]:
                at = at[step]
            value = value_of(parent, key)
            at[path[-1]] = OmegaConf.to_container(value, resolve=True) if isinstance(value, Container) else value
        return conf


_plain_form: _PlainForm | None = None  # the last read-only logging config resolved


def _resolved(log_config: DictConfig) -> Any:
    """``OmegaConf.to_container(log_config, resolve=True)``, from its plain form where it is read-only.

    A read-only config (a split job's hydra node: :class:`sweeper.run.compose.TrialComposer` rewrites
    only leaves outside ``job_logging``) keeps its plain form between jobs; only its interpolations
    (the log file's name) are resolved again, their text parsed once (:mod:`sweeper.run.interpolation`).
    """
    global _plain_form
    if not log_config._get_flag("readonly"):  # noqa: SLF001 - OmegaConf.is_readonly without its flag cache walk
        return OmegaConf.to_container(log_config, resolve=True)
    if _plain_form is None or _plain_form.config is not log_config:
        _plain_form = _PlainForm(log_config)
    return _plain_form.resolved()


def _plain_copy(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _plain_copy(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain_copy(v) for v in node]
    return node


def _key(conf: Any, verbose: Any) -> Any:
    """What a job's logging config is compared by (its file names left out); None where it is not understood."""
    if not isinstance(conf, dict) or not _understood(conf):
        return None
    if isinstance(verbose, ListConfig):
        verbose = tuple(OmegaConf.to_container(verbose))  # type: ignore[arg-type]  # a list
    elif not isinstance(verbose, bool | str):
        return None
    handlers = {name: {k: None if k == "filename" else v for k, v in spec.items()}
                for name, spec in conf["handlers"].items()}
    return _frozen({**conf, "handlers": handlers}), _frozen(verbose)


def _understood(conf: dict[str, Any]) -> bool:
    """Whether :func:`_apply` does with ``conf`` all that dictConfig does (see the module doc)."""
    if set(conf) - {"version", "formatters", "handlers", "root", "disable_existing_loggers", "loggers", "filters",
                    "incremental"}:
        return False
    if conf.get("version") != 1 or type(conf["version"]) is not int or conf.get("incremental", False) is not False:
        return False
    if conf.get("loggers") or conf.get("filters") or not isinstance(conf.get("disable_existing_loggers", True), bool):
        return False
    formatters, handlers, root = conf.get("formatters") or {}, conf.get("handlers") or {}, conf.get("root")
    if not isinstance(formatters, dict) or not isinstance(handlers, dict) or not isinstance(root, dict) or not root:
        return False
    if any(not isinstance(f, dict) or set(f) - _FORMATTER_KEYS or f.get("style", "%") not in ("%", "$")
           for f in formatters.values()):
        return False
    if not all(_handler_understood(spec, formatters) for spec in handlers.values()):
        return False
    if set(root) - {"level", "handlers"} or any(h not in handlers for h in root.get("handlers") or ()):
        return False
    return not _converted({k: v for k, v in conf.items() if k != "handlers"})


def _handler_understood(spec: Any, formatters: dict[str, Any]) -> bool:
    """Whether :func:`_handler` builds what dictConfig builds from a handler's config ``spec``."""
    if not isinstance(spec, dict) or spec.get("class") not in _HANDLER_ARGS:
        return False
    if set(spec) - {"class", "formatter", "level"} - _HANDLER_ARGS[spec["class"]]:
        return False
    if "stream" in spec and spec["stream"] not in _STREAMS:
        return False
    if spec.get("formatter") and spec["formatter"] not in formatters:
        return False
    return not _converted({k: v for k, v in spec.items() if k != "stream"})


def _converted(node: Any) -> bool:
    """Whether ``node`` holds a string dictConfig would convert into an object."""
    if isinstance(node, Mapping):
        return any(_converted(v) for v in node.values())
    if isinstance(node, list):
        return any(_converted(v) for v in node)
    return isinstance(node, str) and _CONVERTED.match(node) is not None


def _frozen(node: Any) -> Any:
    """``node`` as something hashable that tells 1, 1.0 and True apart (dictConfig may not)."""
    if isinstance(node, Mapping):
        return tuple((k, _frozen(v)) for k, v in node.items())
    if isinstance(node, list | tuple):
        return ("list", *map(_frozen, node))
    return type(node), node


def _apply(conf: dict[str, Any]) -> None:
    """``logging.config.dictConfig(conf)`` for a config :func:`_understood` accepts."""
    with logging._lock:  # type: ignore[attr-defined]  # noqa: SLF001 - dictConfig holds logging's lock throughout
        logging.config._clearExistingHandlers()  # type: ignore[attr-defined]  # noqa: SLF001 - as dictConfig
        formatters = {name: _formatter(spec) for name, spec in (conf.get("formatters") or {}).items()}
        handlers = {}
        for name in sorted(conf.get("handlers") or {}):  # dictConfig's order: a file handler opens its file
            handlers[name] = _handler(conf["handlers"][name], formatters)
            handlers[name].name = name
        disabled = conf.get("disable_existing_loggers", True)
        for logger in list(logging.root.manager.loggerDict.values()):  # no logger is named in the config
            logger.disabled = disabled  # type: ignore[union-attr]  # a PlaceHolder too, as dictConfig does
        root, spec = logging.getLogger(), conf["root"]
        if spec.get("level") is not None:
            root.setLevel(logging._checkLevel(spec["level"]))  # type: ignore[attr-defined]  # noqa: SLF001 - as dictConfig
        for handler in root.handlers[:]:
            root.removeHandler(handler)
        for name in spec.get("handlers") or ():
            root.addHandler(handlers[name])


def _formatter(spec: dict[str, Any]) -> logging.Formatter:
    args = (spec.get("format"), spec.get("datefmt"), spec.get("style", "%"))
    return logging.Formatter(*args, spec["validate"]) if "validate" in spec else logging.Formatter(*args)


def _handler(spec: dict[str, Any], formatters: dict[str, logging.Formatter]) -> logging.Handler:
    kwargs = {k: v for k, v in spec.items() if k not in ("class", "formatter", "level")}
    if "stream" in kwargs:
        kwargs["stream"] = getattr(sys, _STREAMS[kwargs["stream"]])  # the stream in force now, as ext:// resolves
    handler = _HANDLER_CLASSES[spec["class"]](**kwargs)
    if spec.get("formatter"):
        handler.setFormatter(formatters[spec["formatter"]])
    if spec.get("level") is not None:
        handler.setLevel(logging._checkLevel(spec["level"]))  # type: ignore[attr-defined]  # noqa: SLF001 - as dictConfig
    return handler


def _apply_verbose(verbose: bool | str | ListConfig) -> None:
    """``hydra.verbose``'s levels, as ``configure_log`` sets them."""
    if isinstance(verbose, bool):
        if verbose:
            logging.getLogger().setLevel(logging.DEBUG)
        return
    for name in [verbose] if isinstance(verbose, str) else verbose:
        logging.getLogger(name).setLevel(logging.DEBUG)
