"""The `tflite` schema package (flatc's generated Python), imported name by name.

The package's `__init__` star-imports all of its ~190 generated modules: 60-75 ms, a sixth of
a `cascader compile` process, while a compile and its save touch about 20 of them. Before
anyone imports `tflite`, `install()` puts in its place a package object that imports a
submodule when one of its names is first asked for, and otherwise behaves as the real one:

  - `tflite.Model` is the class (the star import's binding), also after `tflite.Model` the
    submodule has been imported (the import system sets the attribute to the module);
  - `tflite.ModelStart` and the other generated functions are found in the submodule named by
    their longest prefix that defines them;
  - any other name (`__version__`, say), or `dir()`, runs the real `__init__` first.

If `tflite` was imported already, the real package is left as it is.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types

_NAME = "tflite"


class _SchemaPackage(types.ModuleType):
    def __getattribute__(self, name: str):
        value = super().__getattribute__(name)
        # The import system binds `tflite.X` to the submodule X; the package binds the class X.
        if type(value) is types.ModuleType and value.__name__ == f"{_NAME}.{name}":
            return getattr(value, name, value)
        return value

    def __getattr__(self, name: str):  # names not bound yet
        if not name.startswith("_"):
            submodules = super().__getattribute__("_submodules")
            for end in range(len(name), 0, -1):
                if name[:end] in submodules:
                    module = importlib.import_module(f"{_NAME}.{name[:end]}")
                    if hasattr(module, name):
                        value = getattr(module, name)
                        setattr(self, name, value)
                        return value
        self._load_everything()
        return super().__getattribute__(name)

    def __dir__(self):
        self._load_everything()
        return super().__dir__()

    def _load_everything(self) -> None:
        """Runs the package's own __init__ (once): every name the real package has."""
        if not super().__getattribute__("__dict__").get("_loaded"):
            self._loaded = True
            self.__spec__.loader.exec_module(self)


def install() -> None:
    if _NAME in sys.modules:
        return
    spec = importlib.util.find_spec(_NAME)
    if spec is None or spec.submodule_search_locations is None:
        return  # not installed: the `import tflite` that follows says so
    package = importlib.util.module_from_spec(spec)
    package.__class__ = _SchemaPackage
    package._loaded = False
    package._submodules = frozenset(
        f[:-3] for folder in spec.submodule_search_locations for f in os.listdir(folder)
        if f.endswith(".py") and f != "__init__.py")
    sys.modules[_NAME] = package
