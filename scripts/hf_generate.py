#!/usr/bin/env python3
"""The reference side of scripts/gpu-workloads.sh: a zoo decoder's sizes (configs/zoo/NAME.yaml)
built in Hugging Face transformers with seeded random weights, saved for `psw serve` (its
`weights:`), and decoded greedily by transformers' own `generate`, resident on the GPU.

Writes into --out:
  NAME-fp32.safetensors, NAME-bf16.safetensors
                 the weights by transformers' names (a tied decoder without lm_head.weight, as
                 save_pretrained writes it); the bf16 file is the fp32 one rounded
  prompts.json   {"LENGTH": [ids, ...]}: one seeded prompt per --prompts length
  hf.json        per dtype and prompt length: the ids of greedy `generate` (--max-new-tokens), the
                 top-two logit margin at each generated step (how near greedy was to another
                 token), and in bf16 the median over --repeat runs of the time to first token
                 (generate of one token) and per token after it ((generate of N less generate of
                 one) / (N - 1)), each run between CUDA synchronisations

Norm weights are drawn around 1 and biases around 0 by tests/exec/hf_reference.py's
randomise_norms. The GPU host has transformers; CI does not run this.
"""
import argparse
import json
import os
import statistics
import sys
import time

try:
    import torch
    import transformers
    import yaml
    from safetensors.torch import save_file
except ImportError as e:  # pragma: no cover - the message is the point
    sys.exit(f"hf_generate.py: {e}: needs torch, transformers, safetensors and PyYAML (the GPU host's Python)")

# The GPU tests' reference builder: its Llama config, and norms drawn around 1 and biases around 0.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "exec"))
from hf_reference import llama_config, randomise_norms  # noqa: E402


def zoo_llama_config(zoo):
    """transformers' config of a zoo decoder's sizes, with no token that ends generation."""
    scaling = {}
    if "rope_scaling" in zoo:
        s = zoo["rope_scaling"]
        if s.get("type") != "llama3":
            sys.exit(f"hf_generate.py: rope scaling {s.get('type')!r}: only llama3's is known here")
        scaling = {"rope_type": "llama3", "factor": float(s["factor"]), "low_freq_factor": float(s["low_freq_factor"]),
                   "high_freq_factor": float(s["high_freq_factor"]),
                   "original_max_position_embeddings": int(s["original_max_positions"])}
    return llama_config(zoo["vocabulary"], zoo["hidden"], zoo["intermediate"], zoo["layers"], zoo["heads"],
                        zoo.get("kv_heads", zoo["heads"]), float(zoo.get("rms_norm_eps", 1e-5)), zoo["max_positions"],
                        zoo.get("tie_embeddings", False), float(zoo.get("rope_theta", 10000.0)), scaling,
                        bos_token_id=None, eos_token_id=None, pad_token_id=None)


def save_weights(model, tied, path):
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    if tied:
        state.pop("lm_head.weight")
    save_file(state, path)


def greedy(model, prompt, new_tokens):
    ids = torch.tensor([prompt], device="cuda")
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                             do_sample=False, output_scores=True,
                             return_dict_in_generate=True, eos_token_id=None, pad_token_id=0)
    generated = out.sequences[0, len(prompt):].tolist()
    margins = []
    for scores in out.scores:
        top = torch.topk(scores[0].float(), 2).values
        margins.append(float(top[0] - top[1]))
    return generated, margins


def timed_ms(model, prompt, new_tokens):
    ids = torch.tensor([prompt], device="cuda")
    mask = torch.ones_like(ids)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.no_grad():
        model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens,
                       do_sample=False, eos_token_id=None, pad_token_id=0)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", required=True, help="configs/zoo/NAME.yaml (architecture: llama)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--prompts", default="100,500,2000", help="prompt lengths, comma-separated")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with open(args.zoo) as f:
        zoo = yaml.safe_load(f)
    if zoo.get("architecture") != "llama":
        sys.exit(f"hf_generate.py: {args.zoo}: architecture {zoo.get('architecture')!r}, not llama")
    lengths = [int(x) for x in args.prompts.split(",")]
    if args.max_new_tokens < 2 or any(n < 1 or n + args.max_new_tokens > zoo["max_positions"] for n in lengths):
        sys.exit(f"hf_generate.py: prompts {lengths} with {args.max_new_tokens} new tokens (at least 2) must fit "
                 f"{zoo['max_positions']} positions")
    os.makedirs(args.out, exist_ok=True)
    name = zoo["name"]
    tied = bool(zoo.get("tie_embeddings", False))

    torch.manual_seed(args.seed)
    config = zoo_llama_config(zoo)
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM(config).eval()
    randomise_norms(model)
    save_weights(model, tied, os.path.join(args.out, f"{name}-fp32.safetensors"))
    generator = torch.Generator().manual_seed(args.seed + 1)
    prompts = {n: torch.randint(0, zoo["vocabulary"], (n,), generator=generator).tolist() for n in lengths}
    with open(os.path.join(args.out, "prompts.json"), "w") as f:
        json.dump({str(n): p for n, p in prompts.items()}, f)

    report = {"transformers": transformers.__version__, "torch": torch.__version__, "model": name,
              "attention": model.config._attn_implementation, "max_new_tokens": args.max_new_tokens,
              "repeat": args.repeat, "fp32": {}, "bf16": {}}
    for n, prompt in prompts.items():
        ids, margins = greedy(model, prompt, args.max_new_tokens)
        report["fp32"][str(n)] = {"output_ids": ids, "margins": margins}
        print(f"hf_generate.py: fp32 prompt {n}: {ids[:8]} ...", flush=True)

    model = model.to(torch.bfloat16)
    save_weights(model, tied, os.path.join(args.out, f"{name}-bf16.safetensors"))
    for n, prompt in prompts.items():
        ids, margins = greedy(model, prompt, args.max_new_tokens)
        for _ in range(2):  # warm-up: kernels chosen, caches allocated
            timed_ms(model, prompt, 1)
            timed_ms(model, prompt, args.max_new_tokens)
        first = statistics.median(timed_ms(model, prompt, 1) for _ in range(args.repeat))
        whole = statistics.median(timed_ms(model, prompt, args.max_new_tokens) for _ in range(args.repeat))
        report["bf16"][str(n)] = {"output_ids": ids, "margins": margins, "ttft_ms": first,
                                  "tpot_ms": (whole - first) / (args.max_new_tokens - 1), "generate_ms": whole}
        print(f"hf_generate.py: bf16 prompt {n}: first token {first:.2f} ms, "
              f"{(whole - first) / (args.max_new_tokens - 1):.2f} ms per token after it", flush=True)
    with open(os.path.join(args.out, "hf.json"), "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
