"""Public import paths of a distribution's definitions, pure (issue 18, "The index").

`httpx.Timeout` is defined in `httpx._config` and re-exported by
`httpx/__init__.py` through `from ._config import *` and `__all__`; people
import it as `httpx.Timeout`, so that is the name it is found and shown
under. `public_paths` follows `from X import name [as alias]`, star imports
(honouring the source's `__all__`) and `__all__` itself, across every module
of one distribution. Import cycles (a package re-exporting a module that
imports the package back) end the walk at the repeat, never hang it, and
every walk is bounded by MAX_DEPTH hops.
"""

from __future__ import annotations

from collections.abc import Mapping

from gbr_node.library.extract import ModuleInfo

MAX_DEPTH = 24
MAX_ALIASES = 6

Target = tuple[str, str]
"""(module, local name) of a top-level definition; local "" is the module itself."""


def is_private_path(path: str) -> bool:
    """True when any component of a dotted path starts with `_` (dunders count too)."""
    return any(part.startswith("_") for part in path.split("."))


class _Resolver:
    def __init__(self, modules: Mapping[str, ModuleInfo]) -> None:
        self.modules = modules
        self.tops = {name: info.top_level() for name, info in modules.items()}
        self._resolved: dict[tuple[str, str], Target | None] = {}
        self._exported: dict[str, list[str]] = {}

    def resolve(
        self, module: str, name: str, seen: frozenset[tuple[str, str]] = frozenset()
    ) -> Target | None:
        """Where `module.name` is really defined, or None (outside, unknown, a cycle)."""
        key = (module, name)
        if key in self._resolved:
            return self._resolved[key]
        if key in seen or len(seen) >= MAX_DEPTH or module not in self.modules:
            return None
        seen = seen | {key}
        info = self.modules[module]
        found: Target | None = None
        if name in self.tops[module]:
            found = (module, name)
        elif name in info.imports:
            source, attr = info.imports[name]
            if attr is None:
                found = (source, "") if source in self.modules else None
            elif f"{source}.{attr}" in self.modules and attr not in self.tops.get(source, {}):
                found = (f"{source}.{attr}", "")
            else:
                found = self.resolve(source, attr, seen)
        elif f"{module}.{name}" in self.modules:
            found = (f"{module}.{name}", "")  # a submodule: `pkg.sub` after `import pkg.sub`
        else:
            for star in info.stars:
                if name in self.exported(star, seen):
                    found = self.resolve(star, name, seen)
                    if found is not None:
                        break
        self._resolved[key] = found
        return found

    def exported(self, module: str, seen: frozenset[tuple[str, str]] = frozenset()) -> list[str]:
        """The names `module` offers as its own: `__all__`, else every name it
        binds that does not start with `_`, where a plain module's imports count
        only in the `name as name` form (a package's `__init__` re-exports all)."""
        if module in self._exported:
            return self._exported[module]
        info = self.modules.get(module)
        if info is None or ("*", module) in seen or len(seen) >= MAX_DEPTH:
            return []
        if info.all_names is not None:
            names = list(dict.fromkeys(info.all_names))
        else:
            seen = seen | {("*", module)}
            imported = [n for n in info.imports if info.is_package or n in info.explicit]
            names = [*self.tops[module], *imported]
            for star in info.stars:
                names += self.exported(star, seen)
            names = [n for n in dict.fromkeys(names) if not n.startswith("_")]
        self._exported[module] = names
        return names


def _order(path: str, defining: str) -> tuple[int, bool, int, str]:
    return (path.count("."), path != defining, len(path), path)


def public_paths(modules: Mapping[str, ModuleInfo]) -> dict[Target, list[str]]:
    """Every import path of each top-level definition (and module) of a distribution.

    Returns `{(module, local): [paths...]}` with the best path first: public
    paths (no `_` component) before private ones, then fewer components, then
    shorter. The defining path `module.local` is always among them. At most
    MAX_ALIASES paths are kept per definition.
    """
    resolver = _Resolver(modules)
    paths: dict[Target, set[str]] = {}
    for module in modules:
        paths.setdefault((module, ""), set()).add(module)
        for name in resolver.tops[module]:
            paths.setdefault((module, name), set()).add(f"{module}.{name}")
    for module in modules:
        if is_private_path(module):
            continue
        for name in resolver.exported(module):
            if name.startswith("_"):
                continue
            target = resolver.resolve(module, name)
            if target is not None:
                paths.setdefault(target, set()).add(f"{module}.{name}")
    ordered = {}
    for target, found in paths.items():
        defining = ".".join(p for p in target if p)

        def order(path: str, defining: str = defining) -> tuple[int, bool, int, str]:
            return _order(path, defining)

        public = sorted((p for p in found if not is_private_path(p)), key=order)
        private = sorted((p for p in found if is_private_path(p)), key=order)
        ordered[target] = (public + private)[:MAX_ALIASES]
    return ordered
