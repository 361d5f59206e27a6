#!/usr/bin/env python3
"""Hugging Face transformers as the reference of the zoo's BERT-base and Llama decoders
(tests/exec_cuda/test_hf_reference.cpp, label gpu: the GPU host has transformers; CI does not).

Builds the transformers model with seeded random weights in fp32, eval mode, eager attention,
and writes into --out
  NAME.safetensors     its state_dict by transformers' names (a tied decoder without
                       lm_head.weight, as save_pretrained writes it), and
  NAME_io.safetensors  "input" (seeded token ids) and "output" (BertModel's pooler_output; the
                       decoder's logits at the last position, what the zoo's forward returns).
The C++ test loads the first into the zoo's model and compares with the output.

Norm weights are drawn around 1 and biases around 0 (fresh ones are exactly 1 and 0, under
which a loader that mixed two norms up would go unnoticed).
"""
import argparse
import math
import os
import sys

try:
    import torch
    import transformers
    from safetensors.torch import save_file
except ImportError as e:  # pragma: no cover - the message is the point
    sys.exit(f"hf_reference.py: {e}: needs torch, transformers and safetensors (the GPU host's Python)")


def randomise_norms(model: torch.nn.Module) -> None:
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name.lower() and name.endswith("weight"):
                p.uniform_(0.8, 1.2)
            elif name.endswith("bias"):
                p.uniform_(-0.05, 0.05)


def llama_config(vocab, hidden, intermediate, layers, heads, kv_heads, eps, max_positions, tied, rope_theta,
                 scaling, **extra):
    """A transformers LlamaConfig of these sizes (also scripts/hf_generate.py's); `scaling` is
    transformers' llama3 rope_scaling dict, or empty for none; `extra` more LlamaConfig keys."""
    common = dict(vocab_size=vocab, hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
                  num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=hidden // heads, rms_norm_eps=eps,
                  max_position_embeddings=max_positions, tie_word_embeddings=bool(tied), attention_bias=False,
                  mlp_bias=False, hidden_act="silu", **extra)
    # transformers 5 takes the rotary base (and a scaling) in rope_parameters; 4.x as rope_theta
    # and rope_scaling.
    try:
        return transformers.LlamaConfig(
            rope_parameters=dict(scaling or {"rope_type": "default"}, rope_theta=rope_theta), **common)
    except TypeError:
        return transformers.LlamaConfig(rope_theta=rope_theta, rope_scaling=scaling or None, **common)


def llama(args):
    head_dim = args.hidden // args.heads
    scaling = {}
    if args.rope_scaling:
        factor, low, high, original = (float(x) for x in args.rope_scaling.split(","))
        scaling = {"rope_type": "llama3", "factor": factor, "low_freq_factor": low, "high_freq_factor": high,
                   "original_max_position_embeddings": int(original)}
    config = llama_config(args.vocab, args.hidden, args.intermediate, args.layers, args.heads, args.kv_heads, args.eps,
                          args.max_positions, args.tied, args.rope_theta, scaling)
    config._attn_implementation = "eager"
    model = transformers.LlamaForCausalLM(config).eval()
    randomise_norms(model)
    # The frequencies must be the ones asked for: a silently ignored keyword would leave the base
    # 10000 or no scaling. Llama 3's scaling as Hugging Face's _compute_llama3_parameters has it.
    expected = 1.0 / (args.rope_theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    if scaling:
        context = scaling["original_max_position_embeddings"]
        wavelength = 2 * math.pi / expected
        low_wavelength, high_wavelength = context / scaling["low_freq_factor"], context / scaling["high_freq_factor"]
        scaled = torch.where(wavelength > low_wavelength, expected / scaling["factor"], expected)
        smooth = (context / wavelength - scaling["low_freq_factor"]) / (scaling["high_freq_factor"] - scaling["low_freq_factor"])
        smoothed = (1 - smooth) * scaled / scaling["factor"] + smooth * scaled
        medium = ~(wavelength < high_wavelength) * ~(wavelength > low_wavelength)
        expected = torch.where(medium, smoothed, scaled)
    inv_freq = model.model.rotary_emb.inv_freq.float()
    if not torch.allclose(inv_freq, expected, rtol=1e-6):
        sys.exit(f"hf_reference.py: transformers' rotary frequencies are not those of base {args.rope_theta}"
                 f" and scaling {scaling or 'none'}")
    ids = torch.randint(0, args.vocab, (args.batch, args.tokens), generator=torch.Generator().manual_seed(args.seed))
    with torch.no_grad():
        output = model(input_ids=ids).logits[:, -1, :].contiguous()
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if args.tied:
        state.pop("lm_head.weight")
    return state, ids, output


def bert(args):
    config = transformers.BertConfig()  # bert-base-uncased's sizes, the zoo's bert_base
    config._attn_implementation = "eager"
    model = transformers.BertModel(config, add_pooling_layer=True).eval()
    randomise_norms(model)
    ids = torch.randint(1, config.vocab_size, (args.batch, args.tokens),
                        generator=torch.Generator().manual_seed(args.seed))
    with torch.no_grad():
        output = model(input_ids=ids, token_type_ids=torch.zeros_like(ids)).pooler_output.contiguous()
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    state.pop("embeddings.position_ids", None)  # a buffer of 0..511 older versions saved
    state.pop("embeddings.token_type_ids", None)
    return state, ids, output


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["llama", "bert"], required=True)
    parser.add_argument("--name", required=True, help="file name stem under --out")
    parser.add_argument("--out", required=True)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1)
    for key in ("layers", "hidden", "heads", "kv-heads", "intermediate", "vocab", "max-positions", "tied"):
        parser.add_argument(f"--{key}", type=int, default=0)
    parser.add_argument("--rope-theta", type=float, default=10000.0)
    parser.add_argument("--rope-scaling", default="", help="llama3 scaling: FACTOR,LOW,HIGH,ORIGINAL_MAX_POSITIONS")
    parser.add_argument("--eps", type=float, default=1e-5)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    state, ids, output = llama(args) if args.model == "llama" else bert(args)
    os.makedirs(args.out, exist_ok=True)
    save_file(state, os.path.join(args.out, f"{args.name}.safetensors"))
    save_file({"input": ids, "output": output}, os.path.join(args.out, f"{args.name}_io.safetensors"))
    print(f"hf_reference.py: {args.name}: transformers {transformers.__version__}, {len(state)} tensors, "
          f"output {tuple(output.shape)}")


if __name__ == "__main__":
    main()
