"""OpenAI's Python client, with its defaults, against the gateway at argv[1]: the Conversations API once through.

Prints one JSON object: what each step got back, for __test__/server/conversations-clients.test.mts to check. The
gateway behind it serves one scripted completion (reasoning, then an answer) for the one response here.
"""
import json
import sys

from openai import NotFoundError, OpenAI

client = OpenAI(base_url=sys.argv[1], api_key="unused", max_retries=0)
out = {}

conversation = client.conversations.create(
    items=[{"type": "message", "role": "user", "content": "I am in Paris."}], metadata={"topic": "travel"}
)
out["created"] = [conversation.object, conversation.id.startswith("conv_"), conversation.metadata]

response = client.responses.create(model="gpt-oss", conversation=conversation.id, input="Which country?")
out["response"] = [response.conversation.id == conversation.id, response.output_text]

# Every item, oldest first (the page iterates on to the end), with what `include` asks for (the client writes it
# as `include=…`).
items = list(client.conversations.items.list(conversation.id, order="asc", limit=2, include=["reasoning.encrypted_content"]))
out["items"] = [[item.type, getattr(item, "role", None)] for item in items]
out["sealed"] = [bool(getattr(item, "encrypted_content", None)) for item in items if item.type == "reasoning"]

newest = client.conversations.items.list(conversation.id, limit=1)
item = client.conversations.items.retrieve(newest.data[0].id, conversation_id=conversation.id)
out["newest"] = [len(newest.data), newest.has_more, item.id == newest.data[0].id, item.content[0].text]

added = client.conversations.items.create(conversation.id, items=[{"role": "user", "content": "Thanks."}])
after_delete = client.conversations.items.delete(added.data[0].id, conversation_id=conversation.id)
out["added"] = [len(added.data), added.data[0].status, after_delete.id == conversation.id]

out["updated"] = client.conversations.update(conversation.id, metadata={"topic": "geography"}).metadata

deleted = client.conversations.delete(conversation.id)
out["deleted"] = [deleted.object, deleted.deleted, deleted.id == conversation.id]
try:
    client.conversations.retrieve(conversation.id)
    out["gone"] = "still there"
except NotFoundError as error:
    out["gone"] = error.status_code

print(json.dumps(out))
