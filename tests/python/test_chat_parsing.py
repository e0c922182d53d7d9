"""The C++ V4.1 output parser (ChatStreamParser) against the stream processor of DeepSeek's `deepseek-recipe`
package: generated text (reasoning, answer, DSML tool calls; well-formed and cut off) fed in random chunks must
give the oracle's reasoning, content and tool calls, and the same result whatever the chunking."""
import json
import os
import random

import deepseek_recipe as dr

import chat_corpus as corpus

SEED = int(os.environ.get("FLASHKV_TEST_SEED", random.SystemRandom().randrange(2**32)))
D = "｜DSML｜"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


def oracle_parse(text: str, thinking: bool, tools: bool, chunks: list) -> dict:
    """The final message deepseek-recipe's Chat Completions stream processor makes of `chunks`."""
    body = {"model": "DeepSeek-V4.1-Flash", "messages": [{"role": "user", "content": "Hi"}], "stream": True,
            "thinking": {"type": "enabled" if thinking else "disabled"}}
    if tools:
        body["tools"] = TOOLS
    request = dr.ChatCompletionRequest(body).convert(dr.ConversionOptions())
    processor = dr.StreamProcessor(dr.ChatCompletionRequest.chunk_generator(request, "id", "m"),
                                   request.parsing_options)
    response = dr.ChatCompletionResponse("id", "m", 0, 0, 0)
    inputs = [dr.InferenceChunk.ready()] + [dr.InferenceChunk.text(c, 1) for c in chunks]
    inputs.append(dr.InferenceChunk.finish(dr.InferenceFinishReason.Stop))
    for chunk in inputs:
        for out in processor.push(chunk):
            response.accumulate(out)
    for out in processor.finish():
        response.accumulate(out)
    message = json.loads(response.to_json())["choices"][0]["message"]
    calls = [(c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or []]
    return {"reasoning": message.get("reasoning_content") or "", "content": message.get("content") or "",
            "tool_calls": calls}


def random_chunks(rng: random.Random, text: str) -> list:
    cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(0, 12)))) if len(text) > 1 else []
    return [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]


def random_parameter(rng: random.Random) -> str:
    key = rng.choice(["city", "days", "q", "ключ", "a_b"])  # (the oracle cuts a name at a space)
    if rng.random() < 0.5:
        value = corpus.random_text(rng, 3).replace(f"</{D}", "")
        return f'<{D} parameter name="{key}" string="true">{value}</{D} parameter>'
    value = json.dumps(corpus.random_json_value(rng), ensure_ascii=False)
    return f'<{D} parameter name="{key}" string="false">{value}</{D} parameter>'


def random_calls_block(rng: random.Random) -> str:
    sep = rng.choice(["\n", "", "\n\n"])
    invokes = []
    for _ in range(rng.randint(1, 3)):
        params = sep.join(random_parameter(rng) for _ in range(rng.randint(0, 3)))
        invokes.append(f'<{D} invoke name="tool_{rng.randrange(3)}">{sep}{params}{sep}</{D} invoke>')
    return f"<{D} calls>{sep}" + sep.join(invokes) + f"{sep}</{D} calls>"


def plain(rng: random.Random) -> str:
    """Model text without markup (the parser's markers are added on purpose elsewhere)."""
    text = corpus.random_text(rng)
    for marker in ("</think>", D):
        text = text.replace(marker, "")
    return text


def random_output(rng: random.Random, thinking: bool) -> str:
    text = ""
    if thinking:
        text += rng.choice(["", "\n", "\n\n"]) + plain(rng) + rng.choice(["", "\n"])
        if rng.random() < 0.85:
            text += "</think>" + rng.choice(["", "\n\n"])
    text += plain(rng)
    if rng.random() < 0.2:
        text += "</think>" + plain(rng)  # a stray end-of-thinking marker in the answer is removed
    if rng.random() < 0.5:
        block = rng.choice(["\n\n", "", "\n"]) + random_calls_block(rng)
        if rng.random() < 0.15:
            block = block[: rng.randrange(len(block))]  # cut off inside the block
        text += block
    return text


def ours(fkt, chunks, thinking, tools):
    return fkt.chat_parse(chunks, thinking=thinking, parse_tool_calls=tools)


def test_known_outputs(fkt):
    """Hand-written outputs whose meaning is plain (independent of both implementations)."""
    text = ("Let me check.\n</think>Sure.\n\n" + f'<{D} calls>\n<{D} invoke name="get_weather">\n'
            f'<{D} parameter name="city" string="true">Paris "centre"</{D} parameter>\n'
            f'<{D} parameter name="days" string="false">3</{D} parameter>\n</{D} invoke>\n</{D} calls>')
    got = ours(fkt, [text], True, True)
    assert got["reasoning"] == "Let me check."
    assert got["content"] == "Sure."
    assert got["tool_calls"] == [("get_weather", '{"city": "Paris \\"centre\\"", "days": 3}')]
    assert json.loads(got["tool_calls"][0][1]) == {"city": 'Paris "centre"', "days": 3}
    assert not got["truncated"]
    cut = ours(fkt, [text[:-30]], True, True)
    assert cut["truncated"] and cut["tool_calls"] == []
    chat_mode = ours(fkt, ["\n\nHello</think> world"], False, False)
    assert chat_mode["reasoning"] == "" and chat_mode["content"] == "Hello world"


def test_random_outputs_equal_oracle(fkt):
    rng = random.Random(SEED)
    for i in range(400):
        thinking, tools = rng.random() < 0.7, rng.random() < 0.8
        text = random_output(rng, thinking)
        chunks = random_chunks(rng, text)
        want = oracle_parse(text, thinking, tools, chunks)
        got = ours(fkt, chunks, thinking, tools)
        label = f"seed {SEED} output {i}: {text!r} thinking={thinking} tools={tools}"
        assert got["reasoning"] == want["reasoning"], label
        assert got["content"] == want["content"], label
        if not got["truncated"]:
            assert got["tool_calls"] == want["tool_calls"], label
        else:  # the oracle also reports the unfinished call; ours drops it
            assert got["tool_calls"] == want["tool_calls"][: len(got["tool_calls"])], label


def test_events_do_not_depend_on_chunking(fkt):
    """Concatenated events of any chunking == the result of parsing the whole text at once."""
    rng = random.Random(SEED + 1)
    for i in range(300):
        thinking, tools = rng.random() < 0.7, rng.random() < 0.8
        text = random_output(rng, thinking)
        whole = ours(fkt, [text], thinking, tools)
        chunked = ours(fkt, random_chunks(rng, text), thinking, tools)
        label = f"seed {SEED} output {i}: {text!r}"
        for key in ("reasoning", "content", "tool_calls", "truncated"):
            assert chunked[key] == whole[key], label
        reasoning = "".join(e[1] for e in chunked["events"] if e[0] == "reasoning")
        content = "".join(e[1] for e in chunked["events"] if e[0] == "content")
        calls = [(e[1], e[2]) for e in chunked["events"] if e[0] == "tool_call"]
        assert (reasoning, content, calls) == (whole["reasoning"], whole["content"], whole["tool_calls"]), label
