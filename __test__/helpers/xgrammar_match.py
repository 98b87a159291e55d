"""xgrammar (PyPI, the grammar engine of vLLM, SGLang and TensorRT-LLM) as an oracle for the structured-output
grammars: reads {"cases": [{"kind": "structural_tag" | "ebnf", "grammar": str, "sequences": [[id, ...], ...],
"stops": [id, ...]?}]}
on stdin and writes, per case, one result per sequence: {"accepted": bool, "rejectedAt": int | null,
"terminated": bool} (whether the matcher took every id, where it refused one, and whether it ended there), or
{"error": str} for a grammar xgrammar cannot compile.

The vocabulary is o200k_harmony as the engines give it to xgrammar: they build it from the Hugging Face
tokenizer, which names Harmony's special tokens by their text (`<|channel|>`), so grammars match them as text.
Stop ids (to xgrammar: the ids a matcher takes where its grammar may end): a case's `stops`, by default
<|return|>, <|call|>, <|endoftext|> (what the engine clients send as stop ids); an engine that builds the
vocabulary from the tokenizer's end-of-sequence id alone has <|return|> only.

xgrammar 0.2.8 imports torch (matcher.py, testing.py) and transformers (tokenizer_info.py) when it loads, yet
its compiler and matcher are C++ behind apache-tvm-ffi and use neither. Installing them would take gigabytes
(no CPU-only torch on PyPI), so two empty modules stand in for them; the bitmask helpers, which do need torch,
are not used. tvm_ffi probes torch itself when it loads, so it is imported for real first.
"""

import base64
import importlib.util
import json
import sys
import types

import tvm_ffi  # noqa: F401  (before the stand-ins: it looks for torch when it loads)

if importlib.util.find_spec("torch") is None:
    torch = types.ModuleType("torch")
    torch.Tensor = torch.LongTensor = torch.FloatTensor = type("Tensor", (), {})
    torch.int32, torch.int64, torch.bool = "int32", "int64", "bool"
    torch.tensor = lambda *args, **kwargs: None
    sys.modules["torch"] = torch
if importlib.util.find_spec("transformers") is None:
    transformers = types.ModuleType("transformers")
    transformers.PreTrainedTokenizerBase = type("PreTrainedTokenizerBase", (), {})
    transformers.PreTrainedTokenizerFast = type("PreTrainedTokenizerFast", (transformers.PreTrainedTokenizerBase,), {})
    transformers.LogitsProcessor = type("LogitsProcessor", (), {})
    sys.modules["transformers"] = transformers

import xgrammar  # noqa: E402

VOCAB_SIZE = 201_088
SPECIAL = {
    199998: "<|startoftext|>",
    199999: "<|endoftext|>",
    200002: "<|return|>",
    200003: "<|constrain|>",
    200005: "<|channel|>",
    200006: "<|start|>",
    200007: "<|end|>",
    200008: "<|message|>",
    200012: "<|call|>",
}
DEFAULT_STOPS = [200002, 200012, 199999]


def vocabulary(path):
    encoded = [b""] * VOCAB_SIZE
    with open(path, "rb") as file:
        for line in file:
            if line.strip():
                token, rank = line.split()
                encoded[int(rank)] = base64.b64decode(token)
    for token_id in range(199998, VOCAB_SIZE):
        encoded[token_id] = SPECIAL.get(token_id, f"<|reserved_{token_id}|>").encode()
    return encoded


def compile_case(compiler, case):
    if case["kind"] == "structural_tag":
        return compiler.compile_structural_tag(case["grammar"])
    return compiler.compile_grammar(xgrammar.Grammar.from_ebnf(case["grammar"]))


def match(compiled, sequence):
    matcher = xgrammar.GrammarMatcher(compiled)
    for index, token_id in enumerate(sequence):
        if not matcher.accept_token(token_id):
            return {"accepted": False, "rejectedAt": index, "terminated": matcher.is_terminated()}
    return {"accepted": True, "rejectedAt": None, "terminated": matcher.is_terminated()}


def main():
    request = json.load(sys.stdin)
    encoded = vocabulary(request["vocabulary"])
    compilers = {}
    results = []
    for case in request["cases"]:
        stops = tuple(case.get("stops", DEFAULT_STOPS))
        if stops not in compilers:
            info = xgrammar.TokenizerInfo(encoded, xgrammar.VocabType.RAW, vocab_size=VOCAB_SIZE, stop_token_ids=list(stops))
            compilers[stops] = xgrammar.GrammarCompiler(info, max_threads=2)
        compiler = compilers[stops]
        try:
            compiled = compile_case(compiler, case)
        except Exception as error:  # noqa: BLE001  (any compile failure is the answer for this case)
            results.append({"error": str(error)})
            continue
        results.append([match(compiled, sequence) for sequence in case["sequences"]])
    json.dump(results, sys.stdout)


main()
