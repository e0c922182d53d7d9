"""The README's embedding examples are files that CI builds and runs: each marked block must be its file."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
MARKED_BLOCK = re.compile(r"<!-- readme-example: (\S+) -->\n```\w*\n(.*?)```\n", re.S)


def test_every_readme_example_is_its_file_verbatim():
    blocks = MARKED_BLOCK.findall((ROOT / "README.md").read_text())
    assert {path for path, _ in blocks} >= {
        "examples/cpp/readme.cpp",
        "examples/c/readme.c",
        "examples/python/quickstart.py",
        "examples/rust/examples/readme.rs",
        "examples/go/cmd/readme/main.go",
    }
    for path, text in blocks:
        assert text == (ROOT / path).read_text(), f"README block for {path} differs from the file"
