"""Public definitions of one Python source file, read with `ast` and never imported
(issue 18, "The index"; STD-AI-01). Pure: source text in, `ModuleInfo` out.

Only the module body and class bodies are walked (function bodies are not),
including the branches of `if`/`try` blocks at module level, where libraries put
`TYPE_CHECKING` imports and optional speed-ups (but not `if __name__ ==
"__main__":`, a script's demo code). What is kept per definition:
kind, name, signature, the first paragraph of its docstring, first and last
line. Besides definitions, the module's imports, star imports and a literal
`__all__` are kept so that `exports.py` can follow re-exports.
"""

from __future__ import annotations

import ast
import copy
import re
from dataclasses import dataclass, field
from typing import NamedTuple

MAX_SIGNATURE_CHARS = 400
MAX_DOC_CHARS = 400
MAX_VALUE_CHARS = 80
MAX_MORE_CHARS = 1500
_SPACES = re.compile(r"\s+")
_PROPERTY = {"property", "cached_property", "functools.cached_property"}


class Definition(NamedTuple):
    """One definition in a module.

    `local` is its path inside the module (`"Client.get"`); `kind` is one of
    module, class, function, method, property, attribute, constant, variable.
    `signature` is the parameter list `"(url, *, params=None) -> Response"`
    (for a class, that of its `__init__`; "" when unknown), `bases` a class's
    base classes as written, `params` the parameter names (space-separated,
    what the index matches), `doc` the docstring's first paragraph, `more`
    what else answers questions in words (issue 33): the rest of the
    docstring (parameters' documented meaning, notes), bounded at
    MAX_MORE_CHARS, and for a class its public method names. Lines are
    1-based and inclusive. A named tuple: a big distribution has tens of
    thousands, and a frozen dataclass costs several times more to make.
    """

    kind: str
    local: str
    signature: str
    doc: str
    line: int
    end_line: int
    bases: str = ""
    params: str = ""
    more: str = ""

    @property
    def name(self) -> str:
        """The last component of `local`."""
        return self.local.rpartition(".")[2]


@dataclass
class ModuleInfo:
    """What one module defines and re-exports.

    `imports` maps a local name to `(absolute module, attribute)`, attribute
    None for `import a.b as name`; `stars` are the modules of `from M import *`;
    `all_names` is `__all__` when it is a literal (None when absent or computed);
    `explicit` names the imports written `name as name`, the re-export idiom of
    PEP 484 stubs and typed packages.
    """

    module: str
    is_package: bool = False
    doc: str = ""
    definitions: list[Definition] = field(default_factory=list)
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    stars: list[str] = field(default_factory=list)
    explicit: set[str] = field(default_factory=set)
    all_names: list[str] | None = None

    def top_level(self) -> dict[str, Definition]:
        """Module-level definitions by name (the first one of a name wins)."""
        found: dict[str, Definition] = {}
        for definition in self.definitions:
            if "." not in definition.local and definition.kind != "module":
                found.setdefault(definition.local, definition)
        return found


_MARKUP_ONLY = re.compile(r"^(?:!!!|\?\?\?|\.\. |:[a-z]+:|\[[^\]]*\]\([^)]*\)\s*$|#+ )")


def first_paragraph(doc: str | None) -> str:
    """The first paragraph of prose of a docstring, on one line, cut at
    MAX_DOC_CHARS. Paragraphs that are only markup are passed over: a
    documentation admonition (`!!! abstract "Usage Documentation"`, which
    pydantic puts first), an RST directive (`.. versionadded::`), a lone link
    or a heading."""
    if not doc:
        return ""
    paragraphs = [p.strip() for p in doc.strip().split("\n\n") if p.strip()]
    paragraph = next((p for p in paragraphs if not _MARKUP_ONLY.match(p)), "")
    text = _SPACES.sub(" ", paragraph).strip()
    return text if len(text) <= MAX_DOC_CHARS else text[: MAX_DOC_CHARS - 1] + "…"


def rest_of_doc(doc: str | None) -> str:
    """A docstring past its first paragraph, on one line, cut at MAX_MORE_CHARS
    (what `more` indexes: the Args sections and notes people ask about)."""
    if not doc:
        return ""
    paragraphs = [p.strip() for p in doc.strip().split("\n\n") if p.strip()]
    first = next((n for n, p in enumerate(paragraphs) if not _MARKUP_ONLY.match(p)), 0)
    return _cut(" ".join(paragraphs[first + 1 :]), MAX_MORE_CHARS)


def _cut(text: str, limit: int) -> str:
    text = _SPACES.sub(" ", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef, drop_first: bool) -> str:
    args = node.args
    if drop_first and (args.posonlyargs or args.args):
        args = copy.copy(args)  # without `self` / `cls` (it never has a default)
        if args.posonlyargs:
            args.posonlyargs = args.posonlyargs[1:]
        else:
            args.args = args.args[1:]
    text = f"({ast.unparse(args)})"
    if node.returns is not None:
        text += f" -> {ast.unparse(node.returns)}"
    return _cut(text, MAX_SIGNATURE_CHARS)


def _params(node: ast.FunctionDef | ast.AsyncFunctionDef | None) -> str:
    if node is None:
        return ""
    args = node.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    return " ".join(n for n in names if n not in ("self", "cls"))


def _decorators(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> set[str]:
    names = set()
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Name):
            names.add(target.id)
        elif isinstance(target, ast.Attribute):
            names.add(target.attr)
            if isinstance(target.value, ast.Name):
                names.add(f"{target.value.id}.{target.attr}")
    return names


def _literal_names(node: ast.expr) -> list[str] | None:
    if not isinstance(node, ast.List | ast.Tuple | ast.Set):
        return None
    names = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return names if len(names) == len(node.elts) else None


def _absolute(module: str, is_package: bool, level: int, name: str | None) -> str | None:
    """The absolute module of `from <level dots><name> import ...` inside `module`."""
    if level == 0:
        return name
    parts = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 > len(parts) or (level - 1 == len(parts) and not name):
        return None
    base = parts[: len(parts) - (level - 1)]
    return ".".join([*base, name] if name else base) or None


def _is_main_guard(test: ast.expr) -> bool:
    """`if __name__ == "__main__":`"""
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


class _Reader:
    def __init__(self, info: ModuleInfo, is_package: bool, lines: list[str]) -> None:
        self.info = info
        self.is_package = is_package
        self.lines = lines
        self.all_computed = False

    def module_body(self, body: list[ast.stmt]) -> None:
        for index, node in enumerate(body):
            if isinstance(node, ast.If):
                if _is_main_guard(node.test):
                    continue  # a demo or script part, not the module's API
                self.module_body(node.body)
                self.module_body(node.orelse)
            elif isinstance(node, ast.Try | getattr(ast, "TryStar", ast.Try)):
                self.module_body(node.body)
                for handler in node.handlers:
                    self.module_body(handler.body)
                self.module_body(node.orelse)
                self.module_body(node.finalbody)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.info.imports.setdefault(alias.asname, (alias.name, None))
                        if alias.asname == alias.name.rpartition(".")[2]:
                            self.info.explicit.add(alias.asname)
                    else:
                        top = alias.name.split(".")[0]
                        self.info.imports.setdefault(top, (top, None))
            elif isinstance(node, ast.ImportFrom):
                self.import_from(node)
            elif self.dunder_all(node):
                continue
            else:
                self.definition(node, "", body[index + 1] if index + 1 < len(body) else None)

    def import_from(self, node: ast.ImportFrom) -> None:
        source = _absolute(self.info.module, self.is_package, node.level, node.module)
        if source is None:
            return
        for alias in node.names:
            if alias.name == "*":
                self.info.stars.append(source)
            else:
                self.info.imports.setdefault(alias.asname or alias.name, (source, alias.name))
                if alias.asname == alias.name:
                    self.info.explicit.add(alias.name)

    def dunder_all(self, node: ast.stmt) -> bool:
        """Track `__all__ = [...]`, `+= [...]`, `.extend([...])`, `.append("x")`."""
        info = self.info
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if not any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                return False
            names = _literal_names(node.value) if node.value is not None else None
            if names is None:
                self.all_computed = True
            info.all_names = names
            return True
        if isinstance(node, ast.AugAssign):
            if not (isinstance(node.target, ast.Name) and node.target.id == "__all__"):
                return False
            names = _literal_names(node.value)
            if names is None or info.all_names is None:
                self.all_computed = True
            else:
                info.all_names = info.all_names + names
            return True
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and isinstance(node.value.func.value, ast.Name)
            and node.value.func.value.id == "__all__"
        ):
            call, method = node.value, node.value.func.attr
            if info.all_names is None or len(call.args) != 1:
                self.all_computed = True
            elif method == "append" and isinstance(call.args[0], ast.Constant):
                info.all_names = [*info.all_names, str(call.args[0].value)]
            elif method == "extend" and _literal_names(call.args[0]) is not None:
                info.all_names = info.all_names + (_literal_names(call.args[0]) or [])
            else:
                self.all_computed = True
            return True
        return False

    def definition(self, node: ast.stmt, prefix: str, following: ast.stmt | None) -> None:
        info = self.info
        in_class = bool(prefix)
        if isinstance(node, ast.ClassDef):
            local = prefix + node.name
            init = next(
                (
                    n
                    for n in node.body
                    if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                    and n.name == "__init__"
                ),
                None,
            )
            bases = ", ".join(ast.unparse(b) for b in node.bases)
            doc = ast.get_docstring(node, clean=True)
            methods = " ".join(
                n.name
                for n in node.body
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                and not n.name.startswith("_")
            )
            info.definitions.append(
                Definition(
                    "class",
                    local,
                    _signature(init, True) if init is not None else "",
                    first_paragraph(doc),
                    node.lineno,
                    node.end_lineno or node.lineno,
                    _cut(bases, MAX_SIGNATURE_CHARS),
                    _params(init),
                    _cut(f"{methods} {rest_of_doc(doc)}", MAX_MORE_CHARS),
                )
            )
            for index, child in enumerate(node.body):
                after = node.body[index + 1] if index + 1 < len(node.body) else None
                self.definition(child, local + ".", after)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if in_class and node.name.startswith("__") and node.name != "__call__":
                return
            decorators = _decorators(node)
            if decorators & {"setter", "deleter"}:
                return  # the rest of a property listed already
            if decorators & {"overload", "typing.overload"} and any(
                d.local == prefix + node.name for d in info.definitions[-8:]
            ):
                return
            if decorators & _PROPERTY:
                kind = "property"
            elif in_class:
                kind = "method"
            else:
                kind = "function"
            drop = in_class and "staticmethod" not in decorators and kind != "property"
            signature = "" if kind == "property" else _signature(node, drop)
            if kind == "property" and node.returns is not None:
                signature = f": {_cut(ast.unparse(node.returns), MAX_SIGNATURE_CHARS)}"
            doc = ast.get_docstring(node, clean=True)
            info.definitions.append(
                Definition(
                    kind,
                    prefix + node.name,
                    signature,
                    first_paragraph(doc),
                    node.lineno,
                    node.end_lineno or node.lineno,
                    params=_params(node),
                    more=rest_of_doc(doc),
                )
            )
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if not names:
                return
            name = names[0]
            if in_class and isinstance(node, ast.Assign) and not name.isupper():
                return  # class-level plain assignments are mostly internals; fields are annotated
            if name.startswith("__") and name.endswith("__"):
                return
            doc = ""
            if (
                isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                doc = first_paragraph(following.value.value)
            if isinstance(node, ast.AnnAssign):
                signature = f": {_cut(ast.unparse(node.annotation), MAX_SIGNATURE_CHARS)}"
            else:
                first = self.lines[node.lineno - 1] if node.lineno <= len(self.lines) else ""
                value = first.partition("=")[2].strip()
                signature = f" = {_cut(value, MAX_VALUE_CHARS)}" if value else ""
            kind = "attribute" if in_class else "constant" if name.isupper() else "variable"
            info.definitions.append(
                Definition(
                    kind, prefix + name, signature, doc, node.lineno, node.end_lineno or node.lineno
                )
            )


def parse_module(source: str | bytes, module: str, *, is_package: bool = False) -> ModuleInfo:
    """Read the definitions, imports and `__all__` of one module's source.

    `module` is its absolute dotted name; `is_package` is True for an
    `__init__` file (relative imports resolve from the package itself).
    Raises SyntaxError or ValueError (a null byte) for source `ast` cannot
    parse; the caller skips that file only.
    """
    tree = ast.parse(source)
    text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    doc = ast.get_docstring(tree, clean=True)
    info = ModuleInfo(module, is_package, first_paragraph(doc))
    reader = _Reader(info, is_package, text.splitlines())
    last = len(reader.lines) or 1
    info.definitions.append(Definition("module", "", "", info.doc, 1, last))
    reader.module_body(tree.body)
    if reader.all_computed:
        info.all_names = None
    return info
