"""docs/api.md shows examples/cpp/generate.cpp verbatim (the example CI builds and runs), so the documented code
cannot drift from the code that is compiled."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_api_doc_example_is_the_built_example():
    doc = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- example:begin[^>]*-->\n```cpp\n(.*?)```\n<!-- example:end -->", doc, re.S)
    assert match, "docs/api.md lost its example:begin/example:end block"
    assert match.group(1) == (ROOT / "examples" / "cpp" / "generate.cpp").read_text(encoding="utf-8")
