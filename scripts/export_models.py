"""Exports models that are not in the zoo as TorchScript files, by their usual libraries and as a
user would (torch.jit.trace in eval mode), for scripts/gpu-any-model.sh:

    export_models.py OUT_DIR [NAME ...]

Writes OUT_DIR/NAME.pt; a NAME written NAME:aoti is compiled ahead of time instead (torch.export,
then torch._inductor.aoti_compile_and_package, for cuda: Note [AOTInductor packages]) into
OUT_DIR/NAME-aoti.pt2, the model's name NAME-aoti. It prints one line per model, `NAME FILE DTYPE OUTPUT SHAPE:DTYPE ...`, for
the shell script to pass to `psw run` (--dtype, then one --input-shape/--input-dtype per input) and
to `psw serve` (OUTPUT: one sample's output shape, comma-separated, the entry's output_shape).
Weights are random (no download on the GPU host); the switch and its checks do not depend on them.
A model whose library or trace fails is reported on stderr and skipped.
"""
import os
import sys
import traceback

import torch

BATCH = 8
TOKENS = 128


def torchvision_model(name):
    import torchvision
    return getattr(torchvision.models, name)(weights=None), [((BATCH, 3, 224, 224), torch.float32)]


class LastHiddenState(torch.nn.Module):
    """A Hugging Face model's forward as a user traces it: token ids in, the last hidden state out
    (its outputs are a dict otherwise, which torch.jit.trace refuses)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False, return_dict=False)[0]


def bert_large():
    from transformers import BertConfig, BertModel
    config = BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
                        attn_implementation="eager")
    return LastHiddenState(BertModel(config)), [((BATCH, TOKENS), torch.int64)]


def gpt2():
    from transformers import GPT2Config, GPT2Model
    return LastHiddenState(GPT2Model(GPT2Config(use_cache=False, attn_implementation="eager"))), \
        [((BATCH, TOKENS), torch.int64)]


def llama_1b():
    # TinyLlama-1.1B's shape, in bf16.
    from transformers import LlamaConfig, LlamaModel
    config = LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
                         num_key_value_heads=4, vocab_size=32000, use_cache=False,
                         attn_implementation="eager")
    return LastHiddenState(LlamaModel(config)), [((1, TOKENS), torch.int64)]


MODELS = {
    "resnet50": lambda: torchvision_model("resnet50"),
    "mobilenet_v3_large": lambda: torchvision_model("mobilenet_v3_large"),
    "efficientnet_b0": lambda: torchvision_model("efficientnet_b0"),
    "vit_b_16": lambda: torchvision_model("vit_b_16"),
    "bert_large": bert_large,
    "gpt2": gpt2,
    "llama_1b": llama_1b,
}
DTYPES = {"llama_1b": torch.bfloat16}
NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.int64: "int64"}


def export(name, out):
    name, _, kind = name.partition(":")
    if kind not in ("", "aoti"):
        raise ValueError(f"{name}:{kind}: the only kind is aoti")
    torch.manual_seed(0)
    with torch.device("cuda"):  # random initialisation of a billion parameters is slow on the CPU
        model, inputs = MODELS[name]()
    dtype = DTYPES.get(name, torch.float32)
    model = model.to(dtype).eval()
    examples = tuple(torch.randint(0, 512, shape, device="cuda") if d == torch.int64
                     else torch.randn(shape, device="cuda", dtype=dtype) for shape, d in inputs)
    with torch.no_grad():
        if kind == "aoti":
            name += "-aoti"
            path = os.path.join(out, name + ".pt2")
            torch._inductor.aoti_compile_and_package(torch.export.export(model, examples), package_path=path)
            output = model(*examples)
        else:
            traced = torch.jit.trace(model, examples, check_trace=False)
            output = traced(*examples)
            path = os.path.join(out, name + ".pt")
            traced.save(path)
    output = output[0] if isinstance(output, (tuple, list)) else output
    specs = " ".join(",".join(map(str, shape)) + ":" + NAMES[dtype if d != torch.int64 else d] for shape, d in inputs)
    # One sample's output shape (comma-separated), for a server's metadata (output_shape).
    print(name, path, NAMES[dtype], ",".join(map(str, output.shape[1:])), specs, flush=True)


def main(out, names):
    os.makedirs(out, exist_ok=True)
    for name in names or MODELS:
        try:
            export(name, out)
        except Exception:  # one model's library or trace failing must not stop the others
            print(f"export of {name} failed:", file=sys.stderr)
            traceback.print_exc()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
