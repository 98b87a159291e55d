"""OpenAI's Python client reading a browsing answer from the gateway at argv[1], whole and streamed.

Prints one JSON object for __test__/server/builtin-tools.test.mts: each way's text, and what Python's own
`text[start:end]` gives for each annotation (the indexes count code points, as Python indexes text).
"""
import json
import sys

from openai import OpenAI

client = OpenAI(base_url=sys.argv[1], api_key="unused", max_retries=0)
request = {"model": "gpt-oss", "input": "How tall?", "tools": [{"type": "web_search"}]}


def cited(response):
    part = response.output[-1].content[0]
    return {"text": part.text, "spans": [part.text[a.start_index : a.end_index] for a in part.annotations]}


out = {"whole": cited(client.responses.create(**request))}
deltas = ""
with client.responses.stream(**request) as stream:
    for event in stream:
        if event.type == "response.output_text.delta":
            deltas += event.delta
    out["streamed"] = cited(stream.get_final_response())
out["deltas"] = deltas
print(json.dumps(out, ensure_ascii=False))
