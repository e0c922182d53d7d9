"""Session.chat: a conversation in, the model's answer out as it is generated (docs/python.md, docs/chat.md).

    for event in session.chat([{"role": "user", "content": "Hi"}], max_tokens=200):
        print(event.kind, event.text or event.tool_call)

The messages are encoded as the DeepSeek-V4.1 prompt (Model.encode_chat), the tokens are generated with
Session.generate, turned into text by a Detokenizer (whole characters only) and parsed by a ChatParser into
'reasoning', 'content' and 'tool_call' events.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._flashkv import ChatEvent, ChatParser, Detokenizer


def session_chat(session, messages: list[dict[str, Any]], *, thinking: bool = True, effort: str | int | None = None,
                 tools: list[dict[str, Any]] | None = None, tool_choice: str = "auto",
                 response_format: dict[str, Any] | None = None, **generate_options: Any) -> Iterator[ChatEvent]:
    """Appends the V4.1 prompt of `messages` and yields the answer's ChatEvents as tokens are generated.

    `generate_options` are Session.generate's (max_tokens, temperature, top_p, seed, stop_tokens, ...);
    generation stops at the end-of-sentence token unless stop_at_eos=False. The session keeps the prompt and
    the generated tokens, so a further turn may be appended by the caller."""
    model = session.model
    prompt = model.encode_chat(messages, thinking=thinking, effort=effort, tools=tools, tool_choice=tool_choice,
                               response_format=response_format)
    detokenizer = Detokenizer(model, skip_special=True)
    tools_offered = bool(tools) and tool_choice != "none"
    parser = ChatParser(thinking=thinking, parse_tool_calls=tools_offered,
                        starts_in_tool_calls=tools_offered and tool_choice == "required")
    for token in session.generate(prompt, **generate_options):
        yield from parser.feed(detokenizer.push(token))
    yield from parser.feed(detokenizer.flush())
    yield from parser.finish()
