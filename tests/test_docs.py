"""The repository documents itself: code cites docs/ pages and sections that exist, never files outside it."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Citations of the design documents kept outside the repository (the specification's pages, the
# design notes), in the forms the code used to write them. Built from parts so this file does not
# match itself.
OUTSIDE = re.compile("|".join([
    r"(?:^|[^/a-z])" + "spec" + r"/[a-z_-]+\.md",
    "ARCHITECTURE" + r"\.md",
    r"\b" + "spec" + r" (?:§|R\d)",
]))
# ``docs/credit.md §5.10, §7`` or ``docs/environments.md §6.1-6.2``: the page, then its section numbers.
DOC_CITATION = re.compile(r"docs/((?:[\w-]+/)*[\w-]+\.md)((?:(?:,|;| and)?\s*§\s?\d+(?:\.\d+)*(?:\s?[-–]\s?\d+(?:\.\d+)*)?)*)")
SECTION = re.compile(r"§\s?(\d+(?:\.\d+)*)(?:\s?[-–]\s?(\d+(?:\.\d+)*))?")
HEADING = re.compile(r"^#{1,6}\s+(\d+(?:\.\d+)*)\.?\s", re.MULTILINE)
TEXT_SUFFIXES = (".py", ".md", ".txt", ".toml", ".sh", ".cfg", ".yaml", ".yml")


def tracked_files() -> list[Path]:
    try:
        listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        paths = [ROOT / line for line in listed.splitlines()]
    except (OSError, subprocess.CalledProcessError):  # a copy without git metadata
        paths = [p for p in ROOT.rglob("*") if not any(part.startswith(".") for part in p.relative_to(ROOT).parts)]
    return [p for p in paths if p.is_file() and p.suffix in TEXT_SUFFIXES and p != Path(__file__).resolve()]


def python_files() -> list[Path]:
    return [p for p in tracked_files() if p.suffix == ".py"]


def section_numbers(page: Path) -> set[str]:
    return set(HEADING.findall(page.read_text(encoding="utf-8")))


def test_no_citation_leaves_the_repository():
    offending = []
    for path in tracked_files():
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                offending.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offending, "cite docs/ instead:\n" + "\n".join(offending)


def test_cited_docs_pages_and_sections_exist():
    missing = []
    cited = 0
    for path in python_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in DOC_CITATION.finditer(text):
            cited += 1
            page = ROOT / "docs" / match.group(1)
            where = f"{path.relative_to(ROOT)}: {match.group(0).strip()}"
            if not page.is_file():
                missing.append(f"{where}: no such page")
                continue
            sections = section_numbers(page)
            for first, last in SECTION.findall(match.group(2)):
                for number in filter(None, (first, last)):
                    if number not in sections:
                        missing.append(f"{where}: {page.name} has no section {number}")
    assert cited > 0  # the pattern still finds the code's citations
    assert not missing, "\n".join(missing)


def test_section_pattern_reads_lists_and_ranges():
    text = "see docs/credit.md §5.10, §7 and docs/environments.md §6.1-6.2; also docs/index.md."
    found = [(m.group(1), SECTION.findall(m.group(2))) for m in DOC_CITATION.finditer(text)]
    assert found == [
        ("credit.md", [("5.10", ""), ("7", "")]),
        ("environments.md", [("6.1", "6.2")]),
        ("index.md", []),
    ]


def project_imports(package: str) -> dict[str, set[str]]:
    """Module path -> every absolute import of the project's own code in it (lazy ones included)."""
    found = {}
    for path in sorted((ROOT / package.replace(".", "/")).rglob("*.py")):
        names = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        found[str(path.relative_to(ROOT))] = names
    return found


def test_import_boundaries_of_docs_architecture():
    """The properties docs/architecture.md §3 names: credit needs only shapes, the env side no JAX, the
    config no train/, rollout/ or adapter, and env specs nothing of the project."""
    def outside(package: str, allowed: tuple[str, ...], watched: tuple[str, ...]) -> list[str]:
        return [
            f"{module} imports {name}"
            for module, names in project_imports(package).items()
            for name in sorted(names)
            if name.split(".")[0] in watched and not any(name == a or name.startswith(a + ".") for a in allowed)
        ]

    bad = outside("milegpo_jax.credit", ("milegpo_jax.credit", "milegpo_jax.shapes"), ("milegpo_jax", "envs_bridge"))
    bad.remove("milegpo_jax/credit/__main__.py imports milegpo_jax.config")  # the command joins the CLI and the --set parser
    bad += outside("envs_bridge", ("envs_bridge",), ("milegpo_jax", "jax", "flax", "optax"))
    for adapter in ("textworld_express", "alfworld", "webshop"):
        bad += outside(f"envs_bridge.{adapter}", (f"envs_bridge.{adapter}", "envs_bridge.base"), ("envs_bridge",))
    # the config reads environments through their specs only, and of the library only the jax-free
    # modules of its option types (tests/test_config.py checks jax stays unimported)
    bad += outside("milegpo_jax.config", ("milegpo_jax.config", "milegpo_jax.credit.config", "milegpo_jax.models.model_config",
                                          "milegpo_jax.models.runtime", "milegpo_jax.sampling.config", "milegpo_jax.train.options",
                                          "milegpo_jax.rollout.tree_shape", "milegpo_jax.suggest",
                                          "milegpo_jax.changes", "milegpo_jax.mesh_shape", "envs_bridge.specs"),
                   ("milegpo_jax", "envs_bridge"))
    bad += [f"{module} imports {name}" for module, names in project_imports("envs_bridge").items()
            if module == "envs_bridge/specs.py" for name in sorted(names) if name.split(".")[0] in ("envs_bridge", "milegpo_jax")]
    assert not bad, "update docs/architecture.md §3 if this is intended:\n" + "\n".join(bad)


TEST_MATERIAL = "milegpo_jax.credit.testing"


def imports_test_material(path: Path) -> bool:
    """Whether a module imports ``milegpo_jax.credit.testing`` or one of its modules, in any form."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            named = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            named = [alias.name for alias in node.names]
        else:
            continue
        if any(name == TEST_MATERIAL or name.startswith(TEST_MATERIAL + ".") for name in named):
            return True
    return False


def test_test_material_stays_out_of_the_runtime():
    """The credit oracles and generators (docs/architecture.md §3) are imported by tests and benchmarks only."""
    modules = [path.relative_to(ROOT).as_posix() for folder in ("milegpo_jax", "envs_bridge", "experiments")
               for path in sorted((ROOT / folder).rglob("*.py")) if imports_test_material(path)]
    assert "experiments/bench/credit.py" in modules  # the scan sees the benchmark's import of the oracle
    bad = [m for m in modules if not m.startswith(("milegpo_jax/credit/testing/", "experiments/bench/"))]
    assert not bad, "only tests and experiments/bench/ may import " + TEST_MATERIAL + ":\n" + "\n".join(bad)
