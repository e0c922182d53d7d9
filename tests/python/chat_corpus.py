"""Conversations for the chat-encoding tests: a neutral form (plain dicts) that converts both to the
deepseek-recipe oracle's objects and to the flashkv_testing binding's arguments, plus a seeded generator of
random conversations that exercises every rule of the V4.1 format (docs/chat.md)."""
import json
import random

# A message: {"role", "content", optional "reasoning", "tool_calls": [(id, name, arguments_text)],
# "tool_call_id", "prefix", "tools": [tool]}; a tool: (name, description or None, parameters object or None,
# defer_loading). Options: thinking, effort (None or a level name), tools, tool_choice,
# response ("json_object", a schema object, or None).

TEXT_PIECES = [
    "Hello", "What is the weather in Paris?", "你好，世界", "日本語のテキスト", "😀🚀", " ", "\n", "\n\n", "  leading",
    "trailing  ", "tab\there", "quote \" and back\\slash", "<｜User｜> typed by a user", "</think>", "<think>",
    "<tool_result>fake</tool_result>", "｜DSML｜", "12345 67.89", "def f(x):\n    return x * 2\n", "é à ü ß",
    "\u2028line sep", "Ωmega", "\x7f", "null", "{\"json\": true}", "",
]

FLOATS = [0.5, 1.0, 1e20, 1.5e-07, 0.1, -0.0, 100000.0, 1e16, 1e15, 123456789.125, 1e-05, 0.0001, 2.5e-300]


def random_text(rng: random.Random, max_pieces: int = 4) -> str:
    return "".join(rng.choice(TEXT_PIECES) for _ in range(rng.randint(0, max_pieces)))


def random_json_value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(8 if depth < 2 else 6)
    if kind == 0:
        return random_text(rng, 3)
    if kind == 1:
        return rng.randint(-(2**40), 2**40)
    if kind == 2:
        return rng.choice(FLOATS + [rng.uniform(-1e6, 1e6), rng.uniform(0, 1) * 10 ** rng.randint(-8, 20)])
    if kind == 3:
        return rng.choice([True, False])
    if kind == 4:
        return None
    if kind == 5:
        return rng.choice(["x", "", "multi\nline", "ünï"])
    if kind == 6:
        return [random_json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {f"k{i}{rng.choice(['', 'é', '_x'])}": random_json_value(rng, depth + 1) for i in range(rng.randint(0, 3))}


def random_arguments(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.1:
        return rng.choice(["not json", "[1, 2]", '"a string"', "", "42"])
    obj = {rng.choice(["city", "days", "query", "opts", "flag", "ключ"]) + str(i): random_json_value(rng)
           for i in range(rng.randint(0, 4))}
    separators = rng.choice([(",", ":"), (", ", ": ")])
    return json.dumps(obj, ensure_ascii=rng.random() < 0.3, separators=separators)


def random_tool(rng: random.Random, index: int):
    params = None if rng.random() < 0.15 else {
        "type": "object",
        "properties": {f"p{i}": {"type": rng.choice(["string", "integer", "number"]), "description": random_text(rng, 2)}
                       for i in range(rng.randint(0, 3))},
        "required": ["p0"],
        "x-weight": rng.choice(FLOATS),
    }
    description = None if rng.random() < 0.2 else random_text(rng, 3)
    return (f"tool_{index}", description, params, rng.random() < 0.1)


def random_assistant(rng: random.Random, call_ids: list) -> dict:
    message = {"role": "assistant", "content": random_text(rng)}
    if rng.random() < 0.7:
        message["reasoning"] = random_text(rng)
    if rng.random() < 0.4:
        calls = []
        for _ in range(rng.randint(1, 3)):
            call_id = f"call_{len(call_ids)}"
            call_ids.append(call_id)
            calls.append((call_id, f"tool_{rng.randrange(3)}", random_arguments(rng)))
        message["tool_calls"] = calls
    return message


def random_conversation(rng: random.Random):
    """(messages, options) with a random mix of every message kind and option."""
    messages = []
    call_ids: list = []
    if rng.random() < 0.6:
        system = {"role": "system", "content": random_text(rng)}
        if rng.random() < 0.15:
            system["tools"] = [random_tool(rng, 10 + i) for i in range(rng.randint(1, 2))]
        messages.append(system)
    for _ in range(rng.randint(0, 7)):
        roll = rng.random()
        if roll < 0.35:
            messages.append({"role": "user", "content": random_text(rng)})
        elif roll < 0.7:
            messages.append(random_assistant(rng, call_ids))
        elif roll < 0.85:
            tool_call_id = rng.choice(call_ids + ["unknown_id", ""]) if call_ids else ""
            messages.append({"role": "tool", "content": random_text(rng), "tool_call_id": tool_call_id})
        elif roll < 0.93:
            system = {"role": "system", "content": random_text(rng)}
            if rng.random() < 0.3:
                system["tools"] = [random_tool(rng, 20)]
            messages.append(system)
        else:
            messages.append({"role": "latest_reminder", "content": random_text(rng)})
    if messages and messages[-1]["role"] == "assistant" and rng.random() < 0.4:
        messages[-1]["prefix"] = True
    options = {
        "thinking": rng.random() < 0.65,
        "effort": rng.choice([None, "low", "high", "xhigh", "max"]),
        "tools": [random_tool(rng, i) for i in range(rng.randint(1, 3))] if rng.random() < 0.5 else [],
        "tool_choice": rng.choice(["auto", "auto", "none", "required"]),
        "response": rng.choice([None, None, None, "json_object", {"type": "object", "properties": {"a": {"type": "number"}}}]),
    }
    return messages, options


# ---- conversion to the oracle (deepseek_recipe) ----

def recipe_tool(dr, tool):
    name, description, params, defer = tool
    return dr.ToolDefinition(name, description, params, defer_loading=defer)


def recipe_message(dr, m):
    role = m["role"]
    if role == "system":
        tools = [recipe_tool(dr, t) for t in m.get("tools", [])] or None
        return dr.SystemMessage(m["content"], tools=tools)
    if role == "user":
        return dr.UserMessage(m["content"])
    if role == "tool":
        return dr.ToolMessage(m["content"], tool_call_id=m.get("tool_call_id") or None)
    if role == "latest_reminder":
        return dr.LatestReminderMessage(m["content"])
    calls = [dr.ToolCall(*c) for c in m.get("tool_calls", [])] or None
    return dr.AssistantMessage(m["content"], reasoning_content=m.get("reasoning"), tool_calls=calls,
                               prefix=m.get("prefix", False))


def recipe_conversation(dr, messages, options):
    response = options.get("response")
    kwargs = {}
    if response == "json_object":
        kwargs["response_format"] = "json_object"
    elif response is not None:
        kwargs["response_schema"] = response
    return dr.Conversation([recipe_message(dr, m) for m in messages], thinking_mode=options["thinking"],
                           tools=[recipe_tool(dr, t) for t in options["tools"]] or None,
                           tool_choice=options["tool_choice"], reasoning_effort=options["effort"], **kwargs)


def recipe_prompt(dr, messages, options):
    """(prompt bytes, special byte ranges) from the oracle (its ranges are code-point offsets)."""
    rendered = dr.DeepseekV41Encoding().render_conversation(recipe_conversation(dr, messages, options))
    prompt = rendered.prompt
    to_bytes = lambda i: len(prompt[:i].encode())  # noqa: E731
    return prompt.encode(), [(to_bytes(a), to_bytes(b)) for a, b in rendered.special_ranges]


# ---- conversion to OpenAI-style chat JSON (what chat_from_json, the CLI, the C ABI and Python read) ----

def openai_message(m):
    out = {"role": m["role"], "content": m["content"]}
    if m.get("reasoning") is not None:
        out["reasoning_content"] = m["reasoning"]
    if m.get("tool_calls"):
        out["tool_calls"] = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                             for i, n, a in m["tool_calls"]]
    if m["role"] == "tool":
        out["tool_call_id"] = m.get("tool_call_id", "")
    if m.get("prefix"):
        out["prefix"] = True
    return out


# ---- conversion to the flashkv_testing binding ----

def flashkv_tool(tool):
    name, description, params, defer = tool
    return (name, description or "", "" if params is None else json.dumps(params), defer)


def flashkv_message(m):
    out = {k: v for k, v in m.items() if k != "tools"}
    if "tools" in m:
        out["tools"] = [flashkv_tool(t) for t in m["tools"]]
    return out


def flashkv_kwargs(messages, options):
    response = options.get("response")
    if response == "json_object":
        response_format = '{"type": "json_object"}'
    else:
        response_format = "" if response is None else json.dumps(response)
    return dict(messages=[flashkv_message(m) for m in messages], thinking=options["thinking"],
                effort=options["effort"] or "", tools=[flashkv_tool(t) for t in options["tools"]],
                tool_choice=options["tool_choice"], response_format=response_format)
