"""The reference renderer (PyPI openai-harmony, the official build of openai/harmony) as a test oracle.

Reads {"cases": [{"conversation": {"messages": [...]}, "mode": "completion" | "training", "autoDrop": bool,
"builtinTools": ["browser", "python"]}]} from stdin, the conversation in the reference's own JSON shape (serde: role/name flattened, content parts
"text" / "system_content" / "developer_content"), and writes [{"tokens": [...]} | {"error": "..."}, ...].
The JSON goes straight to the Rust renderer, so nothing in Python re-orders keys or re-formats numbers.
"builtinTools" (optional): the reference's own `ToolNamespaceConfig.browser()` / `.python()` go into the first
system message's tools, so the built-in tools' texts come from the reference, not from the test.
The vocabulary is read from TIKTOKEN_ENCODINGS_BASE; nothing is downloaded.
"""
import json
import sys

from openai_harmony import HarmonyEncodingName, ToolNamespaceConfig, load_harmony_encoding

inner = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)._inner


BUILTIN = {"browser": ToolNamespaceConfig.browser, "python": ToolNamespaceConfig.python}


def with_builtin_tools(conversation, names):
    for message in conversation["messages"]:
        for part in message["content"]:
            if part.get("type") == "system_content":
                part["tools"] = {name: BUILTIN[name]().model_dump(exclude_none=True) for name in names}
                return conversation
    raise ValueError("builtinTools needs a system message with system content")


def run(case):
    # "conversationJson": the JSON text itself, for tests of what JavaScript's JSON.parse changes.
    if "builtinTools" in case:
        case["conversation"] = with_builtin_tools(case["conversation"], case["builtinTools"])
    conversation = case.get("conversationJson") or json.dumps(case["conversation"], ensure_ascii=False)
    config = {"auto_drop_analysis": case["autoDrop"]}
    try:
        if case["mode"] == "training":
            return {"tokens": inner.render_conversation_for_training(conversation_json=conversation, config=config)}
        return {"tokens": inner.render_conversation_for_completion(conversation_json=conversation, next_turn_role="assistant", config=config)}
    except Exception as error:
        return {"error": str(error)}


request = json.load(sys.stdin)
json.dump([run(case) for case in request["cases"]], sys.stdout)
