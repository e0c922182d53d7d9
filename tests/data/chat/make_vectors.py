"""Writes vectors.json: the V4.1 prompts of the rule conversations of tests/python/test_chat_encoding.py as the
deepseek-recipe oracle renders them (run: python3 tests/data/chat/make_vectors.py; needs deepseek-recipe)."""
import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "python"))

import deepseek_recipe as dr  # noqa: E402

import chat_corpus as corpus  # noqa: E402
from test_chat_encoding import RULES  # noqa: E402


def tuples_to_lists(value):
    return json.loads(json.dumps(value))


vectors = []
for name, (messages, options) in sorted(RULES.items()):
    prompt, ranges = corpus.recipe_prompt(dr, messages, options)
    vectors.append({"name": name, "messages": tuples_to_lists(messages), "options": tuples_to_lists(options),
                    "prompt": prompt.decode(), "special_ranges": [list(r) for r in ranges],
                    "oracle": f"deepseek-recipe {dr.__version__}"})
(HERE / "vectors.json").write_text(json.dumps(vectors, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
print(f"wrote {len(vectors)} vectors")
