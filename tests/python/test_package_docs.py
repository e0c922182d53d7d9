"""The Python examples run against the installed package on a tiny checkpoint generated per run (the example's
greedy tokens equal the numpy reference's), docs/python.md shows them verbatim, and the type stubs shipped with the
package name exactly what the compiled module has."""

from __future__ import annotations

import ast
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from tiny_checkpoint_tool import make_tiny_checkpoint

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "python"
SEED = int(os.environ.get("FLASHKV_TEST_SEED") or int.from_bytes(os.urandom(4), "little"))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make_tiny_checkpoint(tmp_path_factory.mktemp("tiny-v41"), "tiny-v41", SEED, "--overwrite")


def run_example(name: str, *args, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    # Run from outside the checkout, so `import flashkv` can only find the installed package.
    return subprocess.run([sys.executable, str(EXAMPLES / name), *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def reference_tokens(checkpoint: pathlib.Path, prompt: list[int], n: int) -> list[int]:
    result = subprocess.run([sys.executable, "-m", "tests.reference.run", "--model", str(checkpoint), "--prompt-ids",
                             ",".join(map(str, prompt)), "-n", str(n), "--json"], capture_output=True, text=True,
                            cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["tokens"]


def test_generate_example_runs_and_its_greedy_tokens_equal_the_reference(flashkv_package, checkpoint, tmp_path):
    prompt = [int(v) for v in __import__("numpy").random.default_rng(SEED).integers(0, 512, 7)]
    result = run_example("generate.py", checkpoint, *prompt, cwd=tmp_path)
    assert result.returncode == 0, f"seed {SEED}: {result.stderr}"
    greedy = [int(v) for v in re.search(r"^greedy: ([\d ]+?)  \(", result.stdout, re.M).group(1).split()]
    expected = reference_tokens(checkpoint, prompt, 8)
    eos = json.loads((checkpoint / "config.json").read_text())["eos_token_id"]
    if eos in expected:  # the example stops at eos, the reference does not
        expected = expected[: expected.index(eos) + 1]
    assert greedy == expected, f"seed {SEED}, prompt {prompt}"
    assert "same as the snapshot: True" in result.stdout

    failed = run_example("generate.py", tmp_path / "missing", cwd=tmp_path)
    assert failed.returncode == 1 and "error (not_found)" in failed.stderr
    assert run_example("generate.py", cwd=tmp_path).returncode == 2


def test_quickstart_runs(flashkv_package, checkpoint, tmp_path):
    result = run_example("quickstart.py", checkpoint, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    tokens = [int(v) for v in result.stdout.splitlines()[0].split()]
    eos = json.loads((checkpoint / "config.json").read_text())["eos_token_id"]
    assert len(tokens) == 8 or (1 <= len(tokens) < 8 and tokens[-1] == eos), tokens  # greedy stops at eos
    assert len((EXAMPLES / "quickstart.py").read_text().splitlines()) <= 15


@pytest.mark.parametrize("marker, example", [("example", "generate.py"), ("quickstart", "quickstart.py")])
def test_python_doc_shows_the_examples_verbatim(marker, example):
    doc = (ROOT / "docs" / "python.md").read_text(encoding="utf-8")
    match = re.search(rf"<!-- {marker}:begin[^>]*-->\n```python\n(.*?)```\n<!-- {marker}:end -->", doc, re.S)
    assert match, f"docs/python.md lost its {marker}:begin/{marker}:end block"
    assert match.group(1) == (EXAMPLES / example).read_text(encoding="utf-8")


def stub_names(tree: ast.Module) -> dict[str, set[str]]:
    """Top-level functions and classes of a stub, each class with its members."""
    names: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = {item.name for item in node.body if isinstance(item, ast.FunctionDef)}
        elif isinstance(node, ast.FunctionDef):
            names[node.name] = set()
    return names


def test_stubs_name_exactly_what_the_module_has(flashkv_package):
    package_dir = pathlib.Path(flashkv_package.__file__).parent
    assert (package_dir / "py.typed").exists()
    stubs = stub_names(ast.parse((package_dir / "_flashkv.pyi").read_text(encoding="utf-8")))
    module = flashkv_package._flashkv
    runtime = {name for name in dir(module) if not name.startswith("__")}
    assert set(stubs) == runtime
    for name, members in stubs.items():
        if not members:
            continue
        cls = getattr(module, name)
        public = {member for member in dir(cls) if not member.startswith("_")}
        assert public == {member for member in members if not member.startswith("_")}, name
    for name in flashkv_package.__all__:
        assert hasattr(flashkv_package, name), name
