"""The user's task, sent to Ray's workers as its script's path, imported there as a module.

Why: a Hydra app's task lives in the script the user ran, i.e. in the driver's ``__main__``.
Ray pickles such a function *by value* (cloudpickle): its code and a copy of the globals it
names, while everything it names through a wrapper that pickles by reference (a helper
decorated with ``functools.lru_cache``, an ``Enum``, a dataclass that the config stores)
is looked up as ``__main__.<name>`` in the worker, whose ``__main__`` is Ray's own
``default_worker.py``. So every trial would fail with ``Can't get attribute 'table' on <module
'__main__' ...>``, and module-level state would be a private copy per function, where Hydra's
basic launcher runs the task in the script's own module.

So the task travels as a :class:`TaskRef` (the script's path, relative to the code
directory too, and the function's name), and the worker imports the script once, as a
module named :data:`MAIN_ALIAS` whose ``__name__`` is not ``"__main__"`` (the script's
``if __name__ == "__main__": main()`` does not run), with its folder on ``sys.path`` (sibling
imports work); an app run as ``python -m pkg.app`` is imported as ``pkg.app``, so its
relative imports work. In the driver the script is registered under the same name and its classes
and functions name it as their module (:func:`_publish`), so they pickle by reference and
the worker finds them in the script it imported: one ``Enum``, one dataclass, one module
state, as under the basic launcher (``multiprocessing`` does the like for a spawned child's
``__mp_main__``). While the task runs, the script is also the worker's ``__main__``, so a
config's ``_target_: __main__.Model`` instantiates the script's class. In the driver (and
where the worker's ``__main__`` is the script) the function itself is used.

:class:`sweeper.run.trial.TrialContext` holds the reference as its first field, so that the
script is imported before anything else of the context (a config whose node is a dataclass
of the script) is unpickled.

To logging, the script is ``__main__`` as under the basic launcher: ``logging.getLogger(__name__)`` in
it gives the ``__main__`` logger, so its records read ``[__main__]`` and Hydra's ``hydra.verbose=__main__``
and ``hydra/job_logging`` entries keyed by ``__main__`` apply to them (:func:`_logging_as_main`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

#: The name the worker imports the user's script under (and aliases as ``__main__``).
MAIN_ALIAS = "__sweeper_main__"


class TaskRef:
    """A callable standing for the task function ``qualname`` of the script at ``path``.

    Pickles as ``(path, relative, qualname)``: unpickling imports the script (see the module
    docstring). ``relative`` is the script's path below the code directory shipped to a
    cluster's nodes (``ray.working_dir``, the workers' current directory there), tried when
    ``path`` does not exist on the node.
    """

    def __init__(self, path: str, relative: str | None, qualname: str,
                 function: Callable[..., Any] | None = None, module_name: str | None = None) -> None:
        self.path, self.relative, self.qualname = path, relative, qualname
        self.module_name = module_name  # set when the app ran as ``python -m pkg.app``
        self._function = function

    @property
    def function(self) -> Callable[..., Any]:
        if self._function is None:
            self._function = _task_in(_script_module(self.path, self.relative, self.module_name), self.qualname)
        return self._function

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        function = self.function
        module = sys.modules.get(MAIN_ALIAS)
        main = sys.modules.get("__main__")
        if module is None or main is module or getattr(main, "__file__", None) == self.path:
            return function(*args, **kwargs)
        # While the task runs, "__main__" is its script, as under the basic launcher: a config's
        # ``_target_: __main__.Model`` (hydra.utils.instantiate) finds the script's class.
        sys.modules["__main__"] = module
        try:
            with _logging_as_main(module.__name__):
                return function(*args, **kwargs)
        finally:
            sys.modules["__main__"] = main  # type: ignore[assignment]  # restored as it was, None included

    def __reduce__(self) -> tuple[Any, ...]:
        return _load, (self.path, self.relative, self.qualname, self.module_name)

    def __repr__(self) -> str:
        return f"TaskRef({self.qualname} in {self.path})"


def task_ref(function: Callable[..., Any], code_dir: str | None = None) -> Callable[..., Any]:
    """``function`` as a :class:`TaskRef` when it lives in the driver's ``__main__`` script, else itself.

    A task defined in an importable module already pickles by reference and is imported in
    the worker under its own name: nothing to do.
    """
    if getattr(function, "__module__", None) not in ("__main__", MAIN_ALIAS):
        return function
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path or getattr(main, function.__qualname__.split(".")[0], None) is None:
        return function  # e.g. a function defined in an interactive session: nothing to import
    _publish(main)
    path = str(Path(path).resolve())
    relative = None
    if code_dir is not None:
        try:
            relative = str(Path(path).relative_to(Path(code_dir).resolve()))
        except ValueError:
            relative = None
    spec = getattr(main, "__spec__", None)  # python -m pkg.app: the worker imports pkg.app, relative imports work
    return TaskRef(path, relative, function.__qualname__, function, getattr(spec, "name", None))


def _publish(main: ModuleType) -> None:
    """Make the driver's script pickle by reference, as the module the workers import.

    cloudpickle copies classes and functions of ``__main__`` *by value*: a worker would get
    a second ``Enum`` or dataclass (``cfg.act is Act.relu`` false in the task) and a copy of
    module state. Registered under :data:`MAIN_ALIAS` with its classes and functions naming
    it as their module, the script's objects pickle as ``__sweeper_main__.<name>``, which
    the worker resolves in the script it imported (:func:`_script_module`).
    """
    sys.modules.setdefault(MAIN_ALIAS, main)
    for obj in list(vars(main).values()):
        if (isinstance(obj, type) or inspect.isfunction(obj)) and getattr(obj, "__module__", None) == "__main__":
            with contextlib.suppress(AttributeError, TypeError):
                obj.__module__ = MAIN_ALIAS


def _load(path: str, relative: str | None, qualname: str, module_name: str | None = None) -> TaskRef:
    ref = TaskRef(path, relative, qualname, module_name=module_name)
    ref.function  # noqa: B018 - import the script now, before the rest of the context is unpickled
    return ref


def _script_module(path: str, relative: str | None, module_name: str | None = None) -> ModuleType:
    """The user's script as a module of this process: ``__main__`` if it is the script, else imported once
    (by its module name when the app ran as ``python -m``, else from its file)."""
    main = sys.modules.get("__main__")
    main_file = getattr(main, "__file__", None)
    if main is not None and main_file and _same_file(main_file, path):
        return main
    loaded = sys.modules.get(MAIN_ALIAS)
    if loaded is not None:
        return loaded
    if module_name:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())  # as ``python -m`` puts the current directory first
        try:
            with _logging_as_main(module_name):
                module = importlib.import_module(module_name)
        except ImportError:
            pass  # not importable on this node: load the file
        else:
            sys.modules[MAIN_ALIAS] = module
            return module
    # Code shipped with ray.working_dir is the worker's current directory: the upload wins over the
    # driver's folder, which a node may also see (one machine, or a shared disk) but at another version.
    where = Path(relative).resolve() if relative is not None and Path(relative).is_file() else Path(path)
    if not where.is_file():
        raise FileNotFoundError(
            f"the task's script {path} is not on this node (cwd {os.getcwd()}): ship the code with "
            f"ray.working_dir (the folder holding the script) or mount it at the same path on every node")
    spec = importlib.util.spec_from_file_location(MAIN_ALIAS, where)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    folder = str(where.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # the script's sibling modules import as they do when it runs
    sys.modules[MAIN_ALIAS] = module
    try:
        with _logging_as_main(MAIN_ALIAS):
            spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[MAIN_ALIAS]
        raise
    return module


@contextlib.contextmanager
def _logging_as_main(name: str) -> Iterator[None]:
    """While the script is imported or its task runs, ``logging.getLogger(name)`` is the ``__main__`` logger.

    Why: under the basic launcher the script is ``__main__``, so ``logging.getLogger(__name__)`` (at import
    or in the task) is the logger that Hydra's ``hydra.verbose=__main__`` and a ``job_logging`` entry for
    ``__main__`` configure, and its records read ``[__main__]``. In a worker the module's ``__name__`` is
    ``name`` (it must not be ``"__main__"`` there: the script's ``if __name__ == "__main__"`` would run, and
    classes would name a module that pickling cannot find), so its logger is aliased instead: the logging
    manager's entry for ``name`` is the ``__main__`` logger itself, one object, one level and one set of
    handlers. The alias holds only in these two windows, not while Hydra configures the job's logging:
    ``logging.config.dictConfig`` treats every entry as a logger of its own, and with
    ``disable_existing_loggers: true`` would disable the ``__main__`` logger through its alias even when
    the config names ``__main__``.

    What it patches: the logging manager's registry (``logging.Logger.manager.loggerDict``, undocumented),
    an entry pointed at another logger for the window and restored after it. Why no public API suffices:
    ``logging`` names each logger once; it has no alias, and a handler or filter copied onto a second logger
    would not share its level nor Hydra's later configuration. How breakage shows: the ``runtime`` app of
    tests/integration/test_user_apps.py (its ``[__main__]`` records under ``hydra.verbose=__main__``).
    """
    manager = logging.Logger.manager
    main_logger = logging.getLogger("__main__")
    if name == "__main__" or manager.loggerDict.get(name) is main_logger:
        yield
        return
    previous = manager.loggerDict.get(name)
    manager.loggerDict[name] = main_logger
    try:
        yield
    finally:
        if manager.loggerDict.get(name) is main_logger:
            if previous is None:
                del manager.loggerDict[name]
            else:
                manager.loggerDict[name] = previous


def _task_in(module: ModuleType, qualname: str) -> Callable[..., Any]:
    """The function ``qualname`` of ``module``, without ``@hydra.main``'s wrapper."""
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    # @hydra.main(...) wraps the task (functools.wraps): the task is the function whose code is the script's.
    while hasattr(obj, "__wrapped__") and not _defined_in(obj, str(module.__file__)):
        obj = obj.__wrapped__
    return obj


def _defined_in(function: Any, path: str) -> bool:
    code = getattr(function, "__code__", None)
    return code is not None and _same_file(code.co_filename, path)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
