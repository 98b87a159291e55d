#!/usr/bin/env python3
"""A tiny GGUF model with gpt-oss's o200k_harmony vocabulary whose next token depends only on the current one.

Used by the engine integration tests (__test__/engines-real/) through a real llama-server: the test picks what
the "model" generates by the last id of its prompt. Run by scripts/llama-server.mjs (which pins `gguf` and
keeps the output outside the repository):

    python make-bigram-model.py --vocabulary o200k_base.tiktoken --model OUT.gguf --chains OUT.json

The vocabulary is written as convert_hf_to_gguf.py writes gpt-oss's (conversion/gpt_oss.py -> _set_vocab_gpt2):
tokenizer model 'gpt2', pre-tokenizer 'gpt-4o' (o200k's split pattern in src/llama-vocab.cpp), every id a
string in GPT-2's byte-to-unicode alphabet, ordinary ids NORMAL and the Harmony special ids CONTROL, BPE merges,
BOS <|startoftext|>, EOS <|return|>, PAD <|endoftext|>, no BOS added. tiktoken files hold ranks, not merges: each
token's merge is found by running BPE over its bytes with the lower ranks only (what tiktoken would do), and
the merges are listed in the order of the rank they make, so llama.cpp's merge priority is tiktoken's.

The network: one llama layer whose attention and MLP weights are zero (the residual stream passes through
untouched), token embeddings one-hot over a few "states" (the ids of the designed chains, plus one dimension
shared by every other id), the final norm scaled so a one-hot row stays one-hot, and the output matrix writing
each state's successor logits. So logits(next) = EDGES[current]: the same on every position, prompt or not.
"""

import argparse
import base64
import json
import sys

import gguf
import numpy as np

VOCAB_SIZE = 201_088  # as gpt-oss's GGUF: o200k_base's 199,998 ranks, then the special ids up to 201,087
N_EMBD = 64  # one dimension per state: room for more chains before this has to grow
N_FF = 32
N_HEAD = 4

STARTOFTEXT, ENDOFTEXT = 199_998, 199_999
RETURN, CONSTRAIN, CHANNEL, START, END, MESSAGE, CALL = 200_002, 200_003, 200_005, 200_006, 200_007, 200_008, 200_012
SPECIAL_NAMES = {
    STARTOFTEXT: "<|startoftext|>",
    ENDOFTEXT: "<|endoftext|>",
    RETURN: "<|return|>",
    CONSTRAIN: "<|constrain|>",
    CHANNEL: "<|channel|>",
    START: "<|start|>",
    END: "<|end|>",
    MESSAGE: "<|message|>",
    CALL: "<|call|>",
}

SURE = 30.0  # a successor's logit; every other id has 0, so e^-30 each: sampling cannot wander off a chain
BRANCH = 29.3  # a second successor: sampled about one time in three at temperature 1 (greedy never takes it)


def special_name(token_id):
    # Names as src/backend/tokens.ts (the reference parser's): reserved ids are <|reserved_N|>.
    return SPECIAL_NAMES.get(token_id, f"<|reserved_{token_id}|>")


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character map (the alphabet of llama.cpp's BPE token strings)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def read_ranks(path):
    ranks = {}
    with open(path, "rb") as file:
        for line in file:
            if line.strip():
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
    if sorted(ranks.values()) != list(range(len(ranks))) or len(ranks) != STARTOFTEXT:
        sys.exit(f"{path}: expected the o200k_base ranks 0..{STARTOFTEXT - 1}")
    return ranks


def merge_of(ranks, token):
    """The two parts tiktoken's BPE joins last to make `token`, merging only pairs ranked below it."""
    limit = ranks[token]
    parts = [bytes([b]) for b in token]
    while len(parts) > 2:
        best = None
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and rank < limit and (best is None or rank < best[1]):
                best = (i, rank)
        if best is None:
            break
        i = best[0]
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    if len(parts) != 2:
        sys.exit(f"no merge makes token {limit} ({token!r})")
    return parts


def vocabulary(ranks):
    alphabet = bytes_to_unicode()
    text = lambda b: "".join(alphabet[x] for x in b)  # noqa: E731
    by_rank = sorted(ranks, key=ranks.get)
    tokens = [text(b) for b in by_rank] + [special_name(i) for i in range(STARTOFTEXT, VOCAB_SIZE)]
    types = [gguf.TokenType.NORMAL] * STARTOFTEXT + [gguf.TokenType.CONTROL] * (VOCAB_SIZE - STARTOFTEXT)
    merges = [" ".join(text(part) for part in merge_of(ranks, b)) for b in by_rank if len(b) > 1]
    return tokens, types, merges


def one_token(ranks, text):
    token = text.encode()
    if token not in ranks:
        sys.exit(f"{text!r} is not one o200k token")
    return ranks[token]


def design(ranks):
    """The states and their successors, and the named chains the tests start (see the sidecar's `chains`)."""
    t = lambda text: one_token(ranks, text)  # noqa: E731
    edges = {}

    def chain(start, *ids, then=None):
        """start -> ids[0] -> ids[1] ...; the last id leads to the first of `then`, if given."""
        path = [start, *ids] + ([then[0]] if then else [])
        for current, following in zip(path, path[1:]):
            if current in edges:
                sys.exit(f"id {current} has two successors")
            edges[current] = [[following, SURE]]
        return {"start": start, "tokens": list(ids)}

    walk = [t(w) for w in (" one", " two", " three", " four", " five", " six", " seven", " eight")]
    walk += [t(w) for w in (" nine", " ten", " eleven", " twelve", " thirteen", " fourteen", " fifteen", " sixteen")]
    chains = {
        # What the gateway's rendered prompt ends with (`<|start|>assistant`) starts a whole final answer:
        # greedy decoding (temperature 0) ends it with <|return|>; see the branch below for sampling.
        "final": chain(t("assistant"), CHANNEL, t("final"), MESSAGE, t("Hello"), t(" world"), RETURN),
        # 🪽 (U+1FABD) is two ids, neither of them whole UTF-8.
        "split": chain(t(" wing"), 4103, 50888, RETURN),
        # 🪽 again as three ids (the bytes F0 and 9F alone, then the split chain's AA BD): two are held back.
        "split3": {**chain(t(" wings"), 172, 253, then=[50888]), "tokens": [172, 253, 50888, RETURN]},
        # The byte E2 alone (the start of a three-byte character), then <|return|>: the text never completes.
        "cut": {**chain(t(" cut"), 158), "tokens": [158, RETURN]},
        # <|end|> ends a message, not the generation: more follows it.
        "end": chain(t(" end"), t("Done"), END, t(" after"), RETURN),
        "call": chain(t(" call"), t("Paris"), CALL),
        # A call header with its recipient first and no channel (` to=functions.get_weather json<|message|>`),
        # then the final chain's text: arguments that are not JSON, what a strict tool's grammar must correct.
        # (<|channel|> and <|message|> lead elsewhere already: a state has one successor.)
        "tool": {
            **chain(t(" tool"), t(" to"), t("="), t("functions"), t(".get"), t("_weather"), t(" json"), then=[MESSAGE]),
            "tokens": [t(" to"), t("="), t("functions"), t(".get"), t("_weather"), t(" json"), MESSAGE, t("Hello"), t(" world"), RETURN],
        },
        # <|endoftext|>, then the walk (what follows if it does not end the generation).
        "endoftext": chain(t(" stop"), t("Bye"), ENDOFTEXT, then=walk),
        # Never ends (`cycle`): greedy goes round the 16 ids; sampling takes a step of 5 about one time in three.
        "walk": {**chain(t(" walk"), then=walk), "cycle": walk},
    }
    # The final answer may also end in <|endoftext|> instead (sampled, about one time in three; greedy never),
    # so a gateway request with the right seed meets it; the walk follows it if it does not end generation.
    edges[t(" world")].append([ENDOFTEXT, BRANCH])
    for i, current in enumerate(walk):
        edges[current] = [[walk[(i + 1) % len(walk)], SURE], [walk[(i + 5) % len(walk)], BRANCH]]
    # Every id that is no state (<|return|> and <|call|> among them) leads to <|return|>.
    fallback = [[RETURN, SURE]]
    return edges, chains, fallback


def tools_design(ranks):
    """A second model, for a gateway's tool loop: wherever the model starts its turn (`<|start|>assistant`, the
    end of every prompt the gateway renders, the results of its tools included), it calls gpt-oss's `python`
    tool as gpt-oss does, on the analysis channel, with `print(42)`, and stops at <|call|>. So a gateway runs
    one call after another until its limit of calls."""
    t = lambda text: one_token(ranks, text)  # noqa: E731
    path = [t("assistant"), CHANNEL, t("analysis"), t(" to"), t("="), t("python"), t(" code"), MESSAGE]
    path += [t("print"), t("("), t("42"), t(")"), CALL]
    edges = {}
    for current, following in zip(path, path[1:]):
        if current in edges:
            sys.exit(f"id {current} has two successors")
        edges[current] = [[following, SURE]]
    chains = {"python": {"start": path[0], "tokens": path[1:]}}
    return edges, chains, [[RETURN, SURE]]


def write_model(path, tokens, types, merges, edges, fallback):
    states = sorted(edges)
    if len(states) + 1 > N_EMBD:
        sys.exit(f"{len(states)} states need N_EMBD > {len(states)}")
    dim = {state: i + 1 for i, state in enumerate(states)}  # dimension 0: every other id

    token_embd = np.zeros((VOCAB_SIZE, N_EMBD), dtype=np.float16)
    token_embd[:, 0] = 1
    output = np.zeros((VOCAB_SIZE, N_EMBD), dtype=np.float32)
    for successor, logit in fallback:
        output[successor, 0] = logit
    for state, successors in edges.items():
        token_embd[state, 0] = 0
        token_embd[state, dim[state]] = 1
        for successor, logit in successors:
            output[successor, dim[state]] = logit

    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name("harmony-stream bigram test model")
    writer.add_context_length(65536)  # a long slot for the abort test; the KV cache is what --ctx-size asks
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(1)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD)
    writer.add_rope_dimension_count(N_EMBD // N_HEAD)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_vocab_size(VOCAB_SIZE)

    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-4o")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(STARTOFTEXT)
    writer.add_eos_token_id(RETURN)
    writer.add_pad_token_id(ENDOFTEXT)
    writer.add_add_bos_token(False)

    ones = np.ones(N_EMBD, dtype=np.float32)
    zero = lambda *shape: np.zeros(shape, dtype=np.float32)  # noqa: E731
    writer.add_tensor("token_embd.weight", token_embd)
    # RMS norm of a one-hot row is sqrt(N_EMBD) times it: this weight makes it one-hot again.
    writer.add_tensor("output_norm.weight", (ones / np.sqrt(N_EMBD)).astype(np.float32))
    writer.add_tensor("output.weight", output)
    writer.add_tensor("blk.0.attn_norm.weight", ones)
    for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
        writer.add_tensor(f"blk.0.{name}.weight", zero(N_EMBD, N_EMBD))
    writer.add_tensor("blk.0.ffn_norm.weight", ones)
    writer.add_tensor("blk.0.ffn_gate.weight", zero(N_FF, N_EMBD))
    writer.add_tensor("blk.0.ffn_up.weight", zero(N_FF, N_EMBD))
    writer.add_tensor("blk.0.ffn_down.weight", zero(N_EMBD, N_FF))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocabulary", required=True, help="o200k_base.tiktoken")
    parser.add_argument("--model", required=True, help="the GGUF file to write")
    parser.add_argument("--chains", required=True, help="the JSON sidecar to write")
    parser.add_argument("--design", choices=["answers", "tools"], default="answers", help="which model (default: answers)")
    args = parser.parse_args()

    ranks = read_ranks(args.vocabulary)
    tokens, types, merges = vocabulary(ranks)
    edges, chains, fallback = (tools_design if args.design == "tools" else design)(ranks)
    write_model(args.model, tokens, types, merges, edges, fallback)
    sidecar = {
        "vocabSize": VOCAB_SIZE,
        # state id -> [[successor id, logit], ...]; any other id: `fallback`. Logits of all other ids are 0.
        "edges": {str(state): successors for state, successors in sorted(edges.items())},
        "fallback": fallback,
        # name -> the prompt's last id that starts it, and the ids greedy decoding then generates (to the
        # first end-of-generation id; `cycle`: ids repeated without end after them).
        "chains": chains,
    }
    with open(args.chains, "w") as file:
        json.dump(sidecar, file, indent=1)
        file.write("\n")


if __name__ == "__main__":
    main()
