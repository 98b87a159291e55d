"""The reference parser (PyPI openai-harmony, the official build of openai/harmony) as a test oracle.

Reads one JSON request from stdin and writes one JSON response to stdout:
  {"cases": [{"tokens": [...], "role": "assistant" | null, "strict": bool, "stream": bool}, ...]}
  -> [{"messages": [...]} | {"error": "..."}, ...]
With "stream", the StreamableParser is driven token by token and the result also has "deltas" (each
token's last_content_delta, "" for none); the stream is then ended with process_eos.
The vocabulary is read from TIKTOKEN_ENCODINGS_BASE (the folder holding o200k_base.tiktoken); nothing
is downloaded.
"""
import json
import sys

from openai_harmony import HarmonyEncodingName, Role, StreamableParser, load_harmony_encoding

encoding = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)


def message_json(message):
    out = {"role": message.author.role.value}
    if message.author.name is not None:
        out["name"] = message.author.name
    if message.channel is not None:
        out["channel"] = message.channel
    if message.recipient is not None:
        out["recipient"] = message.recipient
    if message.content_type is not None:
        out["contentType"] = message.content_type
    out["content"] = "".join(getattr(part, "text", "") for part in message.content)
    return out


def run(case):
    role = Role(case["role"]) if case["role"] is not None else None
    if not case.get("stream"):
        try:
            messages = encoding.parse_messages_from_completion_tokens(case["tokens"], role, strict=case["strict"])
            return {"messages": [message_json(m) for m in messages]}
        except Exception as error:  # HarmonyError carries the reference's message text
            return {"error": str(error)}
    parser = StreamableParser(encoding, role, strict=case["strict"])
    deltas = []
    try:
        for token in case["tokens"]:
            parser.process(token)
            deltas.append(parser.last_content_delta or "")
        parser.process_eos()
    except Exception as error:
        return {"messages": [message_json(m) for m in parser.messages], "deltas": deltas, "error": str(error)}
    return {"messages": [message_json(m) for m in parser.messages], "deltas": deltas}


request = json.load(sys.stdin)
json.dump([run(case) for case in request["cases"]], sys.stdout, ensure_ascii=False)
