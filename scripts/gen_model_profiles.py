#!/usr/bin/env python3
"""Generate the analytic model profiles in configs/models/ from the architecture definitions.

    python3 scripts/gen_model_profiles.py            # (re)write configs/models/*.yaml,
                                                     # bf16/*.yaml and fp16/*.yaml
    python3 scripts/gen_model_profiles.py --check    # exit 1 if the files on disk are stale
    python3 scripts/gen_model_profiles.py --out DIR  # write somewhere else

Standard library only. Each profile is one model at batch 8 in one dtype: its layers in
execution order, where a layer is a module owning parameters or buffers (the unit of transfer and of
gating). Parameterless operations (ReLU, pooling, residual add, concat, softmax, GELU,
attention score matmuls, ...) are folded into the preceding layer in execution order, or
into the following one when no layer precedes them.

Architectures (must match exactly, checked by assertions below):
  resnet152     torchvision resnet152(): Bottleneck [3, 8, 36, 3], input 3x224x224.
  inception_v3  torchvision inception_v3(aux_logits=True), input 3x299x299. AuxLogits
                layers are placed where they run in training (after Mixed_6e) and marked
                training_only.
  bert_base     HuggingFace BertModel, bert-base-uncased config, with pooler, seq 128.
  bert_tiny     the same with Google's BERT-Tiny config (google/bert_uncased_L-2_H-128_A-2).

Cost conventions
----------------
* One multiply-accumulate = 2 FLOPs. conv = 2*Cout*Hout*Wout*(Cin/groups*kh*kw)*batch,
  linear = 2*in*out*tokens (+ `out` per token for the bias is ignored, as usual).
* Elementwise constants (FLOPs per output element) are the *_FLOPS constants below.
  Pooling costs kernel-size FLOPs per output element (global average pooling: H*W).
  Embedding lookups, concat, flatten, permute copies: 0 FLOPs (memory only).
* Forward runs with eval semantics: BatchNorm normalises with running statistics,
  dropout is the identity (0 FLOPs, 0 bytes; not modelled in training either).
* forward_memory_bytes = bytes read + written: input activation + output activation +
  parameters, plus the traffic of the folded ops (elementwise: read + write, in-place
  or not; binary add: two reads + one write; concat: read + write of its output).
  Embeddings read the gathered rows (tokens * hidden), not the whole table.
* Backward:
  - layers with weights (conv, linear) and the parameterless attention matmuls: 2x the
    forward FLOPs (input gradient + weight/second-operand gradient) and 2x the forward
    traffic; the first layer of a network (whose input is the image) skips the input
    gradient: 1x FLOPs and 1x traffic;
  - normalisation, elementwise and pooling ops: 1x the forward FLOPs; traffic is
    grad_out + saved tensor + grad_in (3x the elements) for elementwise and norms (norms
    also read their parameters/statistics and write the affine gradients), grad_out +
    grad_in for pooling (+ the int64 indices for max pooling);
  - embeddings: tokens*hidden FLOPs (scatter-add of the gradient rows); traffic is the
    ids + grad_out + read-modify-write of the rows + the dense gradient table (PyTorch's
    default sparse=False zero-fills and writes a full-size gradient);
  - concat backward is views (0, 0).
* host_read_bytes (embeddings only) = what one forward reads from the table when it stays in
  pinned host memory and the GPU reads it in place (DESIGN.md §3 placement): one row per
  token, T x hidden x 4 bytes (2 in bf16 / fp16); absent for layers that are never read in place.
* activation_bytes = the layer's own output plus the new tensors its folded ops create
  that autograd keeps for backward (ReLU in torchvision is in place and ResNet's residual
  add is in place, so they add nothing; max pooling also keeps its int64 indices; the
  raw / scaled / masked attention scores are transient, the softmax output and the
  contiguous context are kept).

Data types: configs/models/<model>.yaml is fp32; configs/models/bf16/ and fp16/ hold the same
models in 16-bit floats (2 bytes per element where fp32 has 4: parameters, floating buffers,
activations and memory traffic; int64 tensors unchanged; FLOPs unchanged), as the zoo makes
them (make_model's dtype: every floating-point tensor converted, num_batches_tracked kept).

BERT buffers: no buffers are counted for BERT (position_ids / token_type_ids are
non-persistent index buffers in current HuggingFace; counting position_ids would add
4,096 bytes to embeddings.position_embeddings and still round to 437.9 MB).
BERT embedding order is word, position, token_type (the order in the brief, which is also
the order HuggingFace's BertEmbeddings.forward looked them up in 2020, when PipeSwitch was
written; current versions look up token_type before position).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field

BATCH = 8
# Bytes per element of the model's floating-point tensors (parameters, floating buffers,
# activations), by dtype; integer tensors (num_batches_tracked, token ids, max-pooling
# indices) stay int64 in every dtype. FLOPs do not depend on the dtype.
DTYPES = {"fp32": 4, "bf16": 2, "fp16": 2}
ELT = 4  # bytes per element of the dtype being generated (set by generate())
I64 = 8  # bytes per int64 element

# FLOPs per output element of the parameterless / normalisation ops.
RELU_FLOPS = 1      # max(x, 0)
ADD_FLOPS = 1       # residual add / embedding sum
BN_FLOPS = 4        # eval BatchNorm: (x - mean) * rstd * gamma + beta
LN_FLOPS = 8        # LayerNorm: mean, variance, normalise, scale, shift
GELU_FLOPS = 8      # erf GELU: 0.5 * x * (1 + erf(x / sqrt 2))
SOFTMAX_FLOPS = 5   # max, subtract, exp, sum, divide
SCALE_FLOPS = 1     # attention scores / sqrt(head_dim)
MASK_FLOPS = 1      # + extended attention mask
TANH_FLOPS = 4      # pooler tanh

HEADER = "# Generated by scripts/gen_model_profiles.py from the architecture definition; do not edit by hand."
NOTE = ("FLOPs and memory traffic per layer from the architecture; "
        "times come from the hardware profile's compute model")


# --------------------------------------------------------------------------------------
# Profile building blocks
# --------------------------------------------------------------------------------------

@dataclass
class Op:
    fwd_flops: int = 0
    fwd_bytes: int = 0
    bwd_flops: int = 0
    bwd_bytes: int = 0
    kept: int = 0  # bytes of new tensors kept for backward


@dataclass
class Layer:
    name: str
    kind: str
    params: int          # parameter elements
    param_bytes: int     # parameters + buffers, bytes
    training_only: bool = False
    ops: list = field(default_factory=list)
    host_read_bytes: int = 0  # bytes one forward reads if the layer stays in pinned host memory

    def total(self, attr: str) -> int:
        return sum(getattr(op, attr) for op in self.ops)


class Net:
    """Ordered layers; parameterless ops fold into the preceding layer (or the next one)."""

    def __init__(self, name: str):
        self.name = name
        self.layers: list[Layer] = []
        self.pending: list[Op] = []  # ops waiting for the next layer
        self.names: set[str] = set()

    def layer(self, name, kind, params, param_bytes, op, training_only=False) -> Layer:
        assert name not in self.names, f"duplicate layer name {name}"
        self.names.add(name)
        lyr = Layer(name, kind, params, param_bytes, training_only, [op] + self.pending)
        self.pending = []
        self.layers.append(lyr)
        return lyr

    def free(self, op: Op, into: str = "prev") -> None:
        """A parameterless op: fold into the preceding layer, or the next one."""
        if into == "prev" and self.layers:
            self.layers[-1].ops.append(op)
        else:
            self.pending.append(op)

    def finish(self) -> None:
        assert not self.pending, "parameterless ops left with no layer to fold into"


def numel(shape) -> int:
    n = BATCH
    for d in shape:
        n *= d
    return n


def conv_out(size, k, s, p) -> int:
    return (size + 2 * p - k) // s + 1


def pair(v):
    return v if isinstance(v, tuple) else (v, v)


# ---- CNN ops (shapes are per-image (C, H, W)) ----------------------------------------

def conv(net, name, x, cout, k, stride=1, pad=0, first=False, training_only=False):
    cin, h, w = x
    kh, kw = pair(k)
    sh, sw = pair(stride)
    ph, pw = pair(pad)
    y = (cout, conv_out(h, kh, sh, ph), conv_out(w, kw, sw, pw))
    params = cout * cin * kh * kw  # bias=False everywhere in these models
    wbytes = params * ELT
    flops = 2 * numel(y) * cin * kh * kw
    traffic = numel(x) * ELT + numel(y) * ELT + wbytes
    mult = 1 if first else 2
    net.layer(name, "conv", params, wbytes,
              Op(flops, traffic, mult * flops, mult * traffic, numel(y) * ELT), training_only)
    return y


def bn(net, name, x, training_only=False):
    c = x[0]
    params = 2 * c                         # weight, bias
    param_bytes = 4 * c * ELT + I64        # + running_mean, running_var, num_batches_tracked
    e = numel(x)
    flops = BN_FLOPS * e
    net.layer(name, "bn", params, param_bytes,
              Op(flops, 2 * e * ELT + param_bytes, flops,
                 3 * e * ELT + param_bytes + params * ELT, e * ELT), training_only)
    return x


def relu(net, x, inplace=True, into="prev"):
    e = numel(x)
    net.free(Op(RELU_FLOPS * e, 2 * e * ELT, RELU_FLOPS * e, 3 * e * ELT,
                0 if inplace else e * ELT), into)
    return x


def add(net, x, inplace, into="prev"):
    e = numel(x)
    net.free(Op(ADD_FLOPS * e, 3 * e * ELT, ADD_FLOPS * e, 3 * e * ELT,
                0 if inplace else e * ELT), into)
    return x


def pool(net, x, k, stride, pad=0, kind="max", into="prev", ceil_mode=False):
    c, h, w = x
    assert not ceil_mode
    y = (c, conv_out(h, k, stride, pad), conv_out(w, k, stride, pad))
    flops = k * k * numel(y)
    idx = numel(y) * I64 if kind == "max" else 0
    traffic = numel(x) * ELT + numel(y) * ELT
    net.free(Op(flops, traffic, flops, traffic + idx, numel(y) * ELT + idx), into)
    return y


def global_avgpool(net, x, into="prev"):
    c, h, w = x
    y = (c, 1, 1)
    flops = h * w * numel(y)
    traffic = numel(x) * ELT + numel(y) * ELT
    net.free(Op(flops, traffic, flops, traffic, numel(y) * ELT), into)
    return y


def concat(net, shapes):
    c = sum(s[0] for s in shapes)
    h, w = shapes[0][1:]
    assert all(s[1:] == (h, w) for s in shapes)
    y = (c, h, w)
    net.free(Op(0, 2 * numel(y) * ELT, 0, 0, numel(y) * ELT))
    return y


def linear(net, name, fin, fout, tokens, first=False, training_only=False):
    params = fin * fout + fout
    pbytes = params * ELT
    flops = 2 * fin * fout * tokens
    traffic = tokens * fin * ELT + tokens * fout * ELT + pbytes
    mult = 1 if first else 2
    net.layer(name, "linear", params, pbytes,
              Op(flops, traffic, mult * flops, mult * traffic, tokens * fout * ELT),
              training_only)


# --------------------------------------------------------------------------------------
# ResNet-152 (torchvision)
# --------------------------------------------------------------------------------------

def build_resnet152() -> Net:
    net = Net("resnet152")
    x = (3, 224, 224)
    x = conv(net, "conv1", x, 64, 7, 2, 3, first=True)
    x = bn(net, "bn1", x)
    x = relu(net, x)
    x = pool(net, x, 3, 2, 1, "max")
    inplanes = 64
    for li, (planes, blocks, stride) in enumerate(
            [(64, 3, 1), (128, 8, 2), (256, 36, 2), (512, 3, 2)], start=1):
        for bi in range(blocks):
            s = stride if bi == 0 else 1
            p = f"layer{li}.{bi}"
            width = planes
            inp = x
            y = conv(net, f"{p}.conv1", x, width, 1)
            y = bn(net, f"{p}.bn1", y)
            y = relu(net, y)
            y = conv(net, f"{p}.conv2", y, width, 3, s, 1)  # v1.5: stride on the 3x3
            y = bn(net, f"{p}.bn2", y)
            y = relu(net, y)
            y = conv(net, f"{p}.conv3", y, planes * 4, 1)
            y = bn(net, f"{p}.bn3", y)
            if bi == 0 and (s != 1 or inplanes != planes * 4):
                d = conv(net, f"{p}.downsample.0", inp, planes * 4, 1, s)
                d = bn(net, f"{p}.downsample.1", d)
                assert d == y
            y = add(net, y, inplace=True)  # out += identity
            y = relu(net, y)
            x = y
            inplanes = planes * 4
    x = global_avgpool(net, x)  # avgpool + flatten (a view) fold into layer4.2.bn3
    linear(net, "fc", x[0], 1000, BATCH)
    net.finish()
    return net


# --------------------------------------------------------------------------------------
# Inception-v3 (torchvision, aux_logits=True)
# --------------------------------------------------------------------------------------

def basic(net, name, x, cout, k, stride=1, pad=0, first=False, training_only=False):
    """BasicConv2d: conv (no bias) + bn (eps 0.001) + relu (in place)."""
    y = conv(net, f"{name}.conv", x, cout, k, stride, pad, first, training_only)
    y = bn(net, f"{name}.bn", y, training_only)
    return relu(net, y)


def inception_a(net, p, x, pool_features):
    b1 = basic(net, f"{p}.branch1x1", x, 64, 1)
    b5 = basic(net, f"{p}.branch5x5_1", x, 48, 1)
    b5 = basic(net, f"{p}.branch5x5_2", b5, 64, 5, pad=2)
    b3 = basic(net, f"{p}.branch3x3dbl_1", x, 64, 1)
    b3 = basic(net, f"{p}.branch3x3dbl_2", b3, 96, 3, pad=1)
    b3 = basic(net, f"{p}.branch3x3dbl_3", b3, 96, 3, pad=1)
    bp = pool(net, x, 3, 1, 1, "avg")
    bp = basic(net, f"{p}.branch_pool", bp, pool_features, 1)
    return concat(net, [b1, b5, b3, bp])


def inception_b(net, p, x):
    b3 = basic(net, f"{p}.branch3x3", x, 384, 3, stride=2)
    bd = basic(net, f"{p}.branch3x3dbl_1", x, 64, 1)
    bd = basic(net, f"{p}.branch3x3dbl_2", bd, 96, 3, pad=1)
    bd = basic(net, f"{p}.branch3x3dbl_3", bd, 96, 3, stride=2)
    bp = pool(net, x, 3, 2, 0, "max")
    return concat(net, [b3, bd, bp])


def inception_c(net, p, x, c7):
    b1 = basic(net, f"{p}.branch1x1", x, 192, 1)
    b7 = basic(net, f"{p}.branch7x7_1", x, c7, 1)
    b7 = basic(net, f"{p}.branch7x7_2", b7, c7, (1, 7), pad=(0, 3))
    b7 = basic(net, f"{p}.branch7x7_3", b7, 192, (7, 1), pad=(3, 0))
    bd = basic(net, f"{p}.branch7x7dbl_1", x, c7, 1)
    bd = basic(net, f"{p}.branch7x7dbl_2", bd, c7, (7, 1), pad=(3, 0))
    bd = basic(net, f"{p}.branch7x7dbl_3", bd, c7, (1, 7), pad=(0, 3))
    bd = basic(net, f"{p}.branch7x7dbl_4", bd, c7, (7, 1), pad=(3, 0))
    bd = basic(net, f"{p}.branch7x7dbl_5", bd, 192, (1, 7), pad=(0, 3))
    bp = pool(net, x, 3, 1, 1, "avg")
    bp = basic(net, f"{p}.branch_pool", bp, 192, 1)
    return concat(net, [b1, b7, bd, bp])


def inception_d(net, p, x):
    b3 = basic(net, f"{p}.branch3x3_1", x, 192, 1)
    b3 = basic(net, f"{p}.branch3x3_2", b3, 320, 3, stride=2)
    b7 = basic(net, f"{p}.branch7x7x3_1", x, 192, 1)
    b7 = basic(net, f"{p}.branch7x7x3_2", b7, 192, (1, 7), pad=(0, 3))
    b7 = basic(net, f"{p}.branch7x7x3_3", b7, 192, (7, 1), pad=(3, 0))
    b7 = basic(net, f"{p}.branch7x7x3_4", b7, 192, 3, stride=2)
    bp = pool(net, x, 3, 2, 0, "max")
    return concat(net, [b3, b7, bp])


def inception_e(net, p, x):
    b1 = basic(net, f"{p}.branch1x1", x, 320, 1)
    b3 = basic(net, f"{p}.branch3x3_1", x, 384, 1)
    b3a = basic(net, f"{p}.branch3x3_2a", b3, 384, (1, 3), pad=(0, 1))
    b3b = basic(net, f"{p}.branch3x3_2b", b3, 384, (3, 1), pad=(1, 0))
    b3 = concat(net, [b3a, b3b])
    bd = basic(net, f"{p}.branch3x3dbl_1", x, 448, 1)
    bd = basic(net, f"{p}.branch3x3dbl_2", bd, 384, 3, pad=1)
    bda = basic(net, f"{p}.branch3x3dbl_3a", bd, 384, (1, 3), pad=(0, 1))
    bdb = basic(net, f"{p}.branch3x3dbl_3b", bd, 384, (3, 1), pad=(1, 0))
    bd = concat(net, [bda, bdb])
    bp = pool(net, x, 3, 1, 1, "avg")
    bp = basic(net, f"{p}.branch_pool", bp, 192, 1)
    return concat(net, [b1, b3, bd, bp])


def inception_aux(net, x):
    # The aux head's leading avg_pool2d(5, 3) runs only in training, so it folds into the
    # following AuxLogits.conv0.conv (training_only) rather than into Mixed_6e.
    t = True
    x = pool(net, x, 5, 3, 0, "avg", into="next")
    x = basic(net, "AuxLogits.conv0", x, 128, 1, training_only=t)
    x = basic(net, "AuxLogits.conv1", x, 768, 5, training_only=t)
    x = global_avgpool(net, x)  # adaptive_avg_pool2d((1, 1)) + flatten
    linear(net, "AuxLogits.fc", x[0], 1000, BATCH, training_only=t)


def build_inception_v3() -> Net:
    net = Net("inception_v3")
    x = (3, 299, 299)  # transform_input ignored
    x = basic(net, "Conv2d_1a_3x3", x, 32, 3, stride=2, first=True)
    x = basic(net, "Conv2d_2a_3x3", x, 32, 3)
    x = basic(net, "Conv2d_2b_3x3", x, 64, 3, pad=1)
    x = pool(net, x, 3, 2, 0, "max")  # maxpool1
    x = basic(net, "Conv2d_3b_1x1", x, 80, 1)
    x = basic(net, "Conv2d_4a_3x3", x, 192, 3)
    x = pool(net, x, 3, 2, 0, "max")  # maxpool2
    assert x == (192, 35, 35), x
    x = inception_a(net, "Mixed_5b", x, 32)
    x = inception_a(net, "Mixed_5c", x, 64)
    x = inception_a(net, "Mixed_5d", x, 64)
    assert x == (288, 35, 35), x
    x = inception_b(net, "Mixed_6a", x)
    assert x == (768, 17, 17), x
    x = inception_c(net, "Mixed_6b", x, 128)
    x = inception_c(net, "Mixed_6c", x, 160)
    x = inception_c(net, "Mixed_6d", x, 160)
    x = inception_c(net, "Mixed_6e", x, 192)
    inception_aux(net, x)  # training: aux = self.AuxLogits(x) before Mixed_7a
    x = inception_d(net, "Mixed_7a", x)
    assert x == (1280, 8, 8), x
    x = inception_e(net, "Mixed_7b", x)
    x = inception_e(net, "Mixed_7c", x)
    assert x == (2048, 8, 8), x
    x = global_avgpool(net, x)  # avgpool, dropout (identity), flatten
    linear(net, "fc", x[0], 1000, BATCH)
    net.finish()
    return net


# --------------------------------------------------------------------------------------
# BERT (HuggingFace BertModel with pooler): bert-base-uncased and BERT-Tiny
# --------------------------------------------------------------------------------------

VOCAB, MAX_POS, TYPES = 30522, 512, 2
SEQ = 128


def build_bert_base() -> Net:
    return build_bert("bert_base", hidden=768, n_layers=12, heads=12, inter=3072)


def build_bert_tiny() -> Net:
    return build_bert("bert_tiny", hidden=128, n_layers=2, heads=2, inter=512)


def build_bert(name: str, hidden: int, n_layers: int, heads: int, inter: int) -> Net:
    HIDDEN, N_LAYERS, HEADS, INTER = hidden, n_layers, heads, inter
    net = Net(name)
    T = BATCH * SEQ                 # tokens
    act = T * HIDDEN * ELT          # one hidden-state tensor, bytes
    e_h = T * HIDDEN                # hidden-state elements

    def embedding(name, rows):
        params = rows * HIDDEN
        pbytes = params * ELT
        gathered = T * HIDDEN * ELT
        lyr = net.layer(name, "embedding", params, pbytes,
                        Op(0, T * I64 + 2 * gathered, T * HIDDEN,
                           T * I64 + gathered + 2 * gathered + pbytes, act))
        # Read in place from pinned host memory, a lookup fetches one row per token.
        lyr.host_read_bytes = gathered

    def layernorm(name):
        params = 2 * HIDDEN
        pbytes = params * ELT
        flops = LN_FLOPS * e_h
        net.layer(name, "layernorm", params, pbytes,
                  Op(flops, 2 * act + pbytes, flops, 3 * act + 2 * pbytes, act))

    def residual_add():
        net.free(Op(ADD_FLOPS * e_h, 3 * act, ADD_FLOPS * e_h, 3 * act, act))

    embedding("embeddings.word_embeddings", VOCAB)
    embedding("embeddings.position_embeddings", MAX_POS)
    net.free(Op(ADD_FLOPS * e_h, 3 * act, ADD_FLOPS * e_h, 3 * act, 0))  # words + position
    embedding("embeddings.token_type_embeddings", TYPES)
    residual_add()  # + token_type; kept (LayerNorm's input)
    layernorm("embeddings.LayerNorm")  # then dropout (identity)

    head_dim = HIDDEN // HEADS
    assert head_dim * HEADS == HIDDEN
    e_s = BATCH * HEADS * SEQ * SEQ  # attention-score elements
    s_bytes = e_s * ELT
    for i in range(N_LAYERS):
        p = f"encoder.layer.{i}"
        linear(net, f"{p}.attention.self.query", HIDDEN, HIDDEN, T)
        linear(net, f"{p}.attention.self.key", HIDDEN, HIDDEN, T)
        linear(net, f"{p}.attention.self.value", HIDDEN, HIDDEN, T)
        # Folded into value: scores = q k^T; / sqrt(d); + mask; softmax; (dropout); probs v;
        # permute(0, 2, 1, 3).contiguous().view(...)
        mm = 2 * BATCH * HEADS * SEQ * SEQ * head_dim
        qk_bytes = 2 * act + s_bytes
        net.free(Op(mm, qk_bytes, 2 * mm, 2 * qk_bytes, 0))
        net.free(Op(SCALE_FLOPS * e_s, 2 * s_bytes, SCALE_FLOPS * e_s, 2 * s_bytes, 0))
        mask_bytes = BATCH * SEQ * ELT
        net.free(Op(MASK_FLOPS * e_s, 2 * s_bytes + mask_bytes,
                    MASK_FLOPS * e_s, 2 * s_bytes, 0))
        net.free(Op(SOFTMAX_FLOPS * e_s, 2 * s_bytes, SOFTMAX_FLOPS * e_s, 3 * s_bytes, s_bytes))
        pv_bytes = s_bytes + 2 * act
        net.free(Op(mm, pv_bytes, 2 * mm, 2 * pv_bytes, 0))
        net.free(Op(0, 2 * act, 0, 2 * act, act))  # contiguous context, kept
        linear(net, f"{p}.attention.output.dense", HIDDEN, HIDDEN, T)
        residual_add()  # (dropout) + input, kept as LayerNorm's input
        layernorm(f"{p}.attention.output.LayerNorm")
        linear(net, f"{p}.intermediate.dense", HIDDEN, INTER, T)
        e_i = T * INTER
        net.free(Op(GELU_FLOPS * e_i, 2 * e_i * ELT, GELU_FLOPS * e_i, 3 * e_i * ELT,
                    e_i * ELT))  # GELU output, output.dense's input
        linear(net, f"{p}.output.dense", INTER, HIDDEN, T)
        residual_add()
        layernorm(f"{p}.output.LayerNorm")

    # Pooler: first token of each sequence (a view), dense, tanh.
    linear(net, "pooler.dense", HIDDEN, HIDDEN, BATCH)
    e_p = BATCH * HIDDEN
    net.free(Op(TANH_FLOPS * e_p, 2 * e_p * ELT, TANH_FLOPS * e_p, 3 * e_p * ELT, e_p * ELT))
    net.finish()
    return net


# --------------------------------------------------------------------------------------
# Checks and output
# --------------------------------------------------------------------------------------

MODELS = [
    # builder, expected params, expected MB (params + buffers), description
    # builder, expected params, expected MB (params + buffers) per dtype, layers, description
    # (the dtype is appended after "{dtype}")
    (build_resnet152, 60_192_808, {"fp32": "241.4", "bf16": "120.7", "fp16": "120.7"}, 311,
     "torchvision resnet152 (Bottleneck, layers [3, 8, 36, 3]), input 8x3x224x224, {dtype}"),
    (build_inception_v3, 27_161_264, {"fp32": "108.8", "bf16": "54.4", "fp16": "54.4"}, None,
     "torchvision inception_v3(aux_logits=True), input 8x3x299x299, {dtype}; "
     "AuxLogits placed after Mixed_6e, training_only"),
    (build_bert_base, 109_482_240, {"fp32": "437.9", "bf16": "219.0", "fp16": "219.0"}, 101,
     "HuggingFace BertModel (bert-base-uncased config) with pooler, input 8x128 tokens, {dtype}"),
    (build_bert_tiny, 4_385_920, {"fp32": "17.5", "bf16": "8.8", "fp16": "8.8"}, 21,
     "HuggingFace BertModel (google/bert_uncased_L-2_H-128_A-2 config) with pooler, input 8x128 tokens, "
     "{dtype}"),
]

KINDS = {"conv", "bn", "linear", "embedding", "layernorm"}


def check_model(net: Net, params: int, mb: str, n_layers) -> tuple[int, int]:
    total_params = sum(l.params for l in net.layers)
    total_bytes = sum(l.param_bytes for l in net.layers)
    if total_params != params:
        sys.exit(f"{net.name}: {total_params:,} parameters, expected {params:,}")
    if f"{total_bytes / 1e6:.1f}" != mb:
        sys.exit(f"{net.name}: {total_bytes / 1e6:.3f} MB of parameters+buffers, expected {mb}")
    if n_layers is not None and len(net.layers) != n_layers:
        sys.exit(f"{net.name}: {len(net.layers)} layers, expected {n_layers}")
    for l in net.layers:
        assert l.kind in KINDS, l.kind
        for attr in ("fwd_flops", "fwd_bytes", "bwd_flops", "bwd_bytes", "kept"):
            assert l.total(attr) >= 0, (l.name, attr)
    return total_params, total_bytes


def render(net: Net, desc: str, dtype: str, total_params: int, total_bytes: int) -> str:
    out = [
        HEADER,
        f"# {desc}.",
        f"# {len(net.layers)} layers, {total_params:,} parameters, {total_bytes:,} bytes of "
        f"parameters+buffers ({total_bytes / 1e6:.1f} MB).",
        f"name: {net.name}",
        f"batch: {BATCH}",
        f"dtype: {dtype}",
        "source:",
        "  kind: analytic",
        f'  note: "{NOTE}"',
        "layers:",
    ]
    for l in net.layers:
        fields = [
            f"name: {l.name}",
            f"kind: {l.kind}",
            f"param_bytes: {l.param_bytes}",
            f"forward_flops: {l.total('fwd_flops')}",
            f"forward_memory_bytes: {l.total('fwd_bytes')}",
            f"backward_flops: {l.total('bwd_flops')}",
            f"backward_memory_bytes: {l.total('bwd_bytes')}",
            f"activation_bytes: {l.total('kept')}",
        ]
        if l.training_only:
            fields.append("training_only: true")
        if l.host_read_bytes:
            fields.append(f"host_read_bytes: {l.host_read_bytes}")
        out.append("  - {" + ", ".join(fields) + "}")
    return "\n".join(out) + "\n"


def generate() -> list[tuple[str, str, str]]:
    """Returns (file name relative to the output folder, text, summary line) per model and dtype:
    fp32 as <model>.yaml, the others as <dtype>/<model>.yaml."""
    global ELT
    results = []
    for dtype, elt in DTYPES.items():
        ELT = elt
        for build, params, mb, n_layers, desc in MODELS:
            net = build()
            total_params, total_bytes = check_model(net, params, mb[dtype], n_layers)
            text = render(net, desc.format(dtype=dtype), dtype, total_params, total_bytes)
            fname = f"{net.name}.yaml" if dtype == "fp32" else os.path.join(dtype, f"{net.name}.yaml")
            results.append((fname, text, summarise(net, dtype, total_params, total_bytes)))
    ELT = DTYPES["fp32"]
    return results


def summarise(net: Net, dtype: str, total_params: int, total_bytes: int) -> str:
    fwd = sum(l.total("fwd_flops") for l in net.layers)
    bwd = sum(l.total("bwd_flops") for l in net.layers)
    aux = sum(1 for l in net.layers if l.training_only)
    return (f"{net.name} ({dtype}): {len(net.layers)} layers"
            + (f" ({aux} training_only)" if aux else "")
            + f", {total_params:,} params, {total_bytes / 1e6:.1f} MB, "
            f"forward {fwd / 1e9:.2f} GFLOP, backward {bwd / 1e9:.2f} GFLOP")


def main() -> int:
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(repo, "configs", "models"),
                    help="output folder (default: configs/models in the repository)")
    ap.add_argument("--check", action="store_true",
                    help="do not write; exit 1 if any file on disk differs from what would be written")
    args = ap.parse_args()

    results = generate()
    if args.check:
        stale = []
        for fname, text, _ in results:
            path = os.path.join(args.out, fname)
            try:
                with open(path, encoding="utf-8", newline="") as f:
                    if f.read() == text:
                        continue
            except FileNotFoundError:
                pass
            stale.append(path)
        if stale:
            print("model profiles are out of date (run python3 scripts/gen_model_profiles.py):",
                  file=sys.stderr)
            for path in stale:
                print(f"  {path}", file=sys.stderr)
            return 1
        print(f"model profiles in {args.out} are current")
        return 0

    for fname, text, summary in results:
        path = os.path.join(args.out, fname)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        print(f"wrote {path}")
        print(f"  {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
