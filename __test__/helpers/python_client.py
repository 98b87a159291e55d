"""OpenAI's Python client, with its defaults, against the gateway at argv[1]: each step one way people use it.

Prints one JSON object: what each step got back, for __test__/server/python-client.test.mts to check. The gateway
behind it serves scripted completions in the order of the steps here.
"""
import json
import sys

from openai import OpenAI
from pydantic import BaseModel

client = OpenAI(base_url=sys.argv[1], api_key="unused", max_retries=0)
TOOLS = [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
out = {}

# Chat Completions, then a tool call.
chat = client.chat.completions.create(model="gpt-oss", messages=[{"role": "user", "content": "Capital of France?"}])
out["chat"] = chat.choices[0].message.content
called = client.chat.completions.create(
    model="gpt-oss",
    messages=[{"role": "user", "content": "Weather in Paris?"}],
    tools=[{"type": "function", "function": {k: v for k, v in TOOLS[0].items() if k != "type"}}],
)
call = called.choices[0].message.tool_calls[0]
out["chat_call"] = [call.function.name, json.loads(call.function.arguments), called.choices[0].finish_reason]


# Structured output with a pydantic model, parsed by the client.
class City(BaseModel):
    name: str
    country: str


parsed = client.chat.completions.parse(model="gpt-oss", messages=[{"role": "user", "content": "A city?"}], response_format=City)
out["parsed"] = parsed.choices[0].message.parsed.model_dump()

# Responses, streamed; then continued from the stored response.
text = ""
with client.responses.stream(model="gpt-oss", input="Capital of France?") as stream:
    for event in stream:
        if event.type == "response.output_text.delta":
            text += event.delta
    first = stream.get_final_response()
out["streamed"] = [text, first.output_text]
# Counted first: the prompt the continuation below gives the engine.
counted = client.responses.input_tokens.count(model="gpt-oss", previous_response_id=first.id, input="And of Italy?")
out["counted"] = [counted.object, counted.input_tokens]
second = client.responses.create(model="gpt-oss", previous_response_id=first.id, input="And of Italy?")
out["continued"] = [second.previous_response_id == first.id, second.output_text]

# A stateless tool loop with sealed reasoning, as Codex runs one.
turn = client.responses.create(
    model="gpt-oss", input="Weather in Paris?", tools=TOOLS, store=False, include=["reasoning.encrypted_content"]
)
items = [item.model_dump(exclude_none=True) for item in turn.output]
fc = next(item for item in items if item["type"] == "function_call")
answer = client.responses.create(
    model="gpt-oss",
    tools=TOOLS,
    store=False,
    input=[{"role": "user", "content": "Weather in Paris?"}, *items, {"type": "function_call_output", "call_id": fc["call_id"], "output": '{"sky":"clear"}'}],
)
out["stateless"] = [[item["type"] for item in items], bool(items[0].get("encrypted_content")), answer.output_text]

# Two choices (n), whole and streamed with usage: each choice by its index, usage summed over them.
several = client.chat.completions.create(model="gpt-oss", messages=[{"role": "user", "content": "Two answers?"}], n=2)
texts = ["", ""]
usage = None
for chunk in client.chat.completions.create(
    model="gpt-oss",
    messages=[{"role": "user", "content": "Two answers?"}],
    n=2,
    stream=True,
    stream_options={"include_usage": True},
):
    for choice in chunk.choices:
        texts[choice.index] += choice.delta.content or ""
    usage = chunk.usage or usage
out["n"] = [
    [[choice.index, choice.message.content] for choice in several.choices],
    several.usage.completion_tokens,
    texts,
    usage.completion_tokens,
    several.usage.prompt_tokens == usage.prompt_tokens,
]

print(json.dumps(out))
