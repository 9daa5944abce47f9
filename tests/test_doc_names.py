"""The code names README.md and docs/architecture.md cite exist in the code.

Checked, without importing the project (ast only): repository paths (``milegpo_jax/train/packing.py``,
``experiments/bench/``, globs), bare ``.py``/``.sh`` file names, the layout trees, modules run with
``python -m`` or imported in code blocks, code names and package-relative paths in the plain
diagrams (the data flow of docs/architecture.md §2), and backticked code references: dotted names
(``milegpo_jax.train.step``, ``parallel.RULES_TABLE``), CamelCase classes, snake_case functions and
fields, and UPPER_CASE constants or environment variables. The README also keeps its two set-up commands.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs/architecture.md")
PACKAGES = ("milegpo_jax", "experiments", "envs_bridge")
# third-party heads of dotted names: not ours to check
EXTERNAL = {"jax", "jnp", "np", "numpy", "torch", "transformers", "lax", "nnx", "flax", "optax", "orbax",
            "ml_collections", "compiled", "scala", "os", "sys", "AxisType"}
PROSE = {"TensorBoard", "TextWorldExpress", "WebShop", "ALFWorld", "PyTorch", "NumPy"}  # names, not code

PATH = re.compile(r"(?<![\w./-])((?:milegpo_jax|experiments|envs_bridge|tests|docs|\.ci)/[\w./*-]*[\w/*])")
BARE_FILE = re.compile(r"(?<![\w./-])([A-Za-z_][\w-]*\.(?:py|sh))\b")
RUN_MODULE = re.compile(r"python -m ([\w.]+)")
IMPORT_LINE = re.compile(r"^\s*from ([\w.]+) import ([\w, ]+)$", re.MULTILINE)
BACKTICKED = re.compile(r"`([^`\n]+)`")
LEADING_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
RELATIVE_PATH = re.compile(r"(?<![\w./-])([\w-]+/(?:(?:[\w-]+/)*[\w-]+\.py\b|(?:[\w-]+/)+(?=[\s,)])))")  # credit/api.py in a diagram: under a package
WORD = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z_]*(?:\.\w+)?$")  # NAME.py, DIR: stand for the reader's own


@functools.cache
def tracked() -> tuple[str, ...]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        return tuple(out.splitlines())
    except (OSError, subprocess.CalledProcessError):  # a copy without git metadata
        return tuple(p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*") if p.is_file())


@functools.cache
def directories() -> frozenset[str]:
    return frozenset(str(Path(p).parent.as_posix()) + "/" for p in tracked()) | frozenset(
        "/".join(p.split("/")[:i]) + "/" for p in tracked() for i in range(1, p.count("/") + 1))


@functools.cache
def module_tree(path: str) -> ast.Module:
    return ast.parse((ROOT / path).read_text(encoding="utf-8"))


def code_files() -> list[str]:
    return [p for p in tracked() if p.endswith(".py") and p.split("/")[0] in PACKAGES]


def defined_names(tree: ast.AST, top_level_only: bool = False) -> set[str]:
    """Functions, classes, assigned names and attributes, annotated fields, arguments, imported names."""
    names = set()
    nodes = tree.body if top_level_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            if not top_level_only:
                args = node.args if not isinstance(node, ast.ClassDef) else None
                if args is not None:
                    names.update(a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs))
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Name):
                        names.add(sub.id)
                    elif isinstance(sub, ast.Attribute):
                        names.add(sub.attr)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def string_constants(tree: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


@functools.cache
def known_names() -> frozenset[str]:
    """Every name the project's code defines, and every identifier-like string in it (JSON keys, lazy exports)."""
    names = set()
    for path in code_files():
        tree = module_tree(path)
        names |= defined_names(tree)
        names |= {s for s in string_constants(tree) if s.isidentifier()}
        names |= {part.removesuffix(".py") for part in path.split("/")}  # modules and packages by name
    return frozenset(names)


THIS_FILE = Path(__file__).resolve().relative_to(ROOT).as_posix()


@functools.cache
def script_text() -> str:
    return "\n".join((ROOT / p).read_text(encoding="utf-8", errors="replace")
                     for p in tracked() if p.endswith((".py", ".sh")) and (ROOT / p).is_file()
                     and p != THIS_FILE)  # its own made-up names must stay missing


def module_file(dotted: str) -> str | None:
    base = dotted.replace(".", "/")
    for candidate in (base + ".py", base + "/__init__.py"):
        if candidate in tracked():
            return candidate
    return None


def resolve(dotted: str) -> str | None:
    """None if ``dotted`` names a module of the project, or a module and names defined in it; else why not."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        path = module_file(".".join(parts[:cut]))
        if path is None:
            continue
        rest = parts[cut:]
        if not rest:
            return None
        tree = module_tree(path)
        if rest[0] not in defined_names(tree, top_level_only=True) | string_constants(tree):
            return f"{path} defines no {rest[0]}"
        missing = [name for name in rest[1:] if name not in known_names()]
        return f"no {', '.join(missing)} in the code" if missing else None
    return "no such module"


def fenced(text: str, plain_only: bool = False) -> list[str]:
    """The bodies of the fenced blocks; ``plain_only``: those without a language (layouts, diagrams)."""
    return [body for language, body in FENCE.findall(text) if not (plain_only and language)]


def layout_paths(block: str) -> list[str]:
    """The entries of a layout tree (a fenced block that starts at a package folder), as repository paths."""
    lines = block.splitlines()
    if not lines or not lines[0].startswith("milegpo_jax/"):
        return []
    stack: list[tuple[int, str]] = []
    paths = []
    for line in lines:
        indent = len(line) - len(line.lstrip(" "))
        token = line.split()[0] if line.strip() else ""
        if not token or indent > 6 or not re.fullmatch(r"[\w.-]+/?", token):
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = "".join(name for _, name in stack) + token
        paths.append(path)
        if token.endswith("/"):
            stack.append((indent, token))
    return paths


def path_exists(path: str) -> bool:
    if any(PLACEHOLDER.match(part) for part in path.rstrip("/").split("/")):
        return True
    if "*" in path:
        return any(ROOT.glob(path))
    return (ROOT / path).exists() and (path.rstrip("/") in tracked() or path.rstrip("/") + "/" in directories())


def code_reference(span: str) -> str | None:
    """The name a backticked span cites, if it reads as a reference to code; else None."""
    if span.startswith(("-", "$", "<", "python ", "bash ", "pip ")):
        return None
    match = LEADING_NAME.match(span)
    if match is None:
        return None
    name = match.group(0)
    if "." in name:
        if name.split(".")[-1] in {"py", "sh", "md", "json", "jsonl", "txt", "png", "toml", "safetensors", "tiktoken"}:
            return None
        return None if name.split(".")[0] in EXTERNAL else name
    if name in PROSE:
        return None
    camel = re.fullmatch(r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+", name) is not None
    snake = "_" in name.strip("_")
    return name if camel or snake else None


def problems(text: str) -> list[str]:
    """Every cited name of ``text`` that the code lacks, one line each."""
    found = []
    blocks = fenced(text)
    for path in PATH.findall(text):
        if not path_exists(path):
            found.append(f"path {path}: not in the repository")
    basenames = {Path(p).name for p in tracked()}
    for name in BARE_FILE.findall(text):
        if name not in basenames and not PLACEHOLDER.match(name):
            found.append(f"file {name}: no file of that name")
    for block in blocks:
        for path in layout_paths(block):
            if not path_exists(path):
                found.append(f"layout entry {path}: not in the repository")
        for module, names in IMPORT_LINE.findall(block):
            for name in (n.strip() for n in names.split(",")):
                if module.split(".")[0] in PACKAGES and (why := resolve(f"{module}.{name}")):
                    found.append(f"from {module} import {name}: {why}")
    for block in fenced(text, plain_only=True):  # the data-flow and import diagrams name code bare
        for path in RELATIVE_PATH.findall(block):
            if not any(path_exists(prefix + path) for prefix in ("", "milegpo_jax/", "envs_bridge/", "experiments/")):
                found.append(f"diagram path {path}: not in the repository")
        for word in WORD.findall(block):
            if (name := code_reference(word)) and (why := name_problem(name)):
                found.append(f"diagram name {word}: {why}")
    for module in RUN_MODULE.findall(text):
        if module.split(".")[0] in PACKAGES and not (module_file(module) or f"{module.replace('.', '/')}/__main__.py" in tracked()):
            found.append(f"python -m {module}: no such module")
    for span in BACKTICKED.findall(text):
        name = code_reference(span)
        if name is not None and (why := name_problem(name)):
            found.append(f"`{span}`: {why}")
    return found


def name_problem(name: str) -> str | None:
    """Why ``name`` (a module path, a dotted attribute, a class, a function, a constant) is not in the code."""
    head = name.split(".")[0]
    if head in PACKAGES:
        return resolve(name)
    if "." in name:
        last = name.split(".")[-1]
        return None if last in known_names() else f"no {last} in the code"
    if name.isupper():
        return None if name in script_text() else "named in no script"
    return None if name in known_names() else "not defined in the code"


def test_cited_code_names_exist():
    bad = [f"{page}: {problem}" for page in PAGES for problem in problems((ROOT / page).read_text(encoding="utf-8"))]
    assert not bad, "the docs cite names the code lacks (rename them in the docs):\n" + "\n".join(bad)


def test_the_check_finds_missing_names():
    text = """`milegpo_jax.train.no_such_module` and `milegpo_jax.train.step.no_such_function` in
milegpo_jax/train/no_such_file.py; `no_such_helper()`, `NoSuchClass`, `parallel.NO_SUCH_TABLE`,
`NO_SUCH_VARIABLE`, python -m experiments.no_such_entry

```
milegpo_jax/      the library
  no_such_dir/    nothing
```

```
no_such_program (jit)        credit/no_such_pass.py
```
"""
    found = problems(text)
    for name in ("no_such_module", "no_such_function", "no_such_file.py", "no_such_helper()", "NoSuchClass",
                 "NO_SUCH_TABLE", "NO_SUCH_VARIABLE", "experiments.no_such_entry", "milegpo_jax/no_such_dir/",
                 "no_such_program", "credit/no_such_pass.py"):
        assert any(name in line for line in found), f"{name} was not reported: {found}"
    assert not problems("`milegpo_jax.train.step.build_train_step`, `compute_credit`, milegpo_jax/train/packing.py")


def test_readme_keeps_the_two_set_up_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = [line.split("#")[0].strip() for block in fenced(readme) for line in block.splitlines()
                if line.startswith("bash ")]
    assert commands == ["bash experiments/run.sh", "bash tests/run.sh"]
    assert "bash tests/run.sh" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
