"""A PyTorch MoE block as an inference engine wires megamoe in: a router, softmax top-k with
renormalised weights, and megamoe.Layer for the experts; beside it the same block in plain PyTorch
fp32 (the reference it is checked against).

    python examples/moe_block.py [--config kimi_k3_a8w4] [--experts-per-rank 112] [--tokens 1,8,128] [--compile]

--experts-per-rank cuts the model to that many experts (one rank's share of a wider group:
Kimi-K3's 896 experts take 118 GB of fp32 weights in the plain-PyTorch twin; 112 is a rank of EP8).

Prints relL2 of the megamoe block against the fp32 block per token count and PASS/FAIL against
the bar of the C++ check (0.06 against the exact reference). Needs a GPU and PyTorch.
"""

import argparse
import sys

import torch

import megamoe

E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


class MoEBlock(torch.nn.Module):
    """Router (a linear map to every expert's logit), softmax over the experts, top-k, weights
    renormalised over the k, then the experts through megamoe."""

    def __init__(self, layer, router_weight):
        super().__init__()
        self.layer = layer
        self.register_buffer("router_weight", router_weight)  # [experts, model_dim] fp32

    def route(self, x):
        probs = torch.softmax(x.float() @ self.router_weight.t(), dim=-1)
        weights, ids = torch.topk(probs, self.layer.topk, dim=-1)
        return ids, weights / weights.sum(dim=-1, keepdim=True)

    def forward(self, x):
        ids, weights = self.route(x)
        return self.layer(x, ids, weights)


def dequantize_mxfp4(packed, scales):
    """fp32 values of MXFP4 tensors (packed uint8 [..., K/2], e8m0 scales uint8 [..., K/32])."""
    lut = torch.tensor(E2M1, dtype=torch.float32, device=packed.device)
    values = torch.stack((lut[(packed & 15).long()], lut[(packed >> 4).long()]), dim=-1).flatten(-2)
    blocks = values.unflatten(-1, (-1, 32)) * torch.exp2(scales.float() - 127).unsqueeze(-1)
    return blocks.flatten(-2)


def activation(info, gate, up):
    """The config's activation in fp32, as docs/contract.md ("The call") defines it."""
    kind = info["activation"]
    if kind == "silu":
        return torch.nn.functional.silu(gate) * up
    if kind == "situv2":
        b, lb = info["beta"], info["linear_beta"]
        return b * torch.tanh(gate / b) * torch.sigmoid(gate) * (lb * torch.tanh(up / lb))
    if kind == "swiglu":  # gpt-oss's: gate clamped above, up both ways, alpha in the sigmoid, up offset
        limit, alpha, offset = info["limit"], info["alpha"], info["up_offset"]
        gate, up = gate.clamp(max=limit), up.clamp(-limit, limit)
        return gate * torch.sigmoid(alpha * gate) * (up + offset)
    raise ValueError(f"activation {kind!r}")


def reference_experts(info, x, ids, weights, w1, w2, b1=None, b2=None):
    """y[t] = sum_k weights[t, k] * (W2_e act(W1gate_e x[t] + b1gate_e, W1up_e x[t] + b1up_e) + b2_e)
    in fp32, e = ids[t, k]; w1 [E, 2I, D] and w2 [E, D, I] fp32 (the dequantized MXFP4 weights),
    the expert biases b1 [E, 2I] and b2 [E, D] where the config has them; ids outside [0, E) are
    skipped."""
    inter = info["inter_dim"]
    y = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    xf = x.float()
    for e in torch.unique(ids).tolist():
        if not 0 <= e < w1.shape[0]:
            continue
        t, k = torch.nonzero(ids == e, as_tuple=True)
        h = xf[t] @ w1[e].t()
        if b1 is not None:
            h = h + b1[e].float()
        out = activation(info, h[:, :inter], h[:, inter:]) @ w2[e].t()
        if b2 is not None:
            out = out + b2[e].float()
        y.index_add_(0, t, out * weights[t, k].unsqueeze(-1))
    return y


def reference_block(block, info, x, w1, w2, b1=None, b2=None):
    ids, weights = block.route(x)
    return reference_experts(info, x, ids, weights, w1, w2, b1, b2)


def random_mxfp4(info, experts, device, generator):
    """MXFP4 weights drawn at random: e2m1 codes uniform, scales around 2^-6 (so that outputs stay
    in bf16's comfortable range), as uint8 torch tensors on `device`."""
    d, i = info["model_dim"], info["inter_dim"]

    def draw(shape):
        packed = torch.randint(0, 256, shape, dtype=torch.uint8, device=device, generator=generator)
        scales = torch.randint(120, 124, shape[:-1] + (shape[-1] * 2 // 32,), dtype=torch.uint8, device=device,
                               generator=generator)
        return packed, scales

    w1, w1s = draw((experts, 2 * i, d // 2))
    w2, w2s = draw((experts, d, i // 2))
    return w1, w1s, w2, w2s


def random_block(layer, info, device, gen):
    """Random MXFP4 weights (and, where the config has them, expert biases) loaded into `layer`,
    a random router around it: the MoEBlock, and its fp32 twin's tensors (w1, w2, b1, b2)."""
    w1, w1s, w2, w2s = random_mxfp4(info, layer.experts_per_rank, device, gen)
    biases = {}
    if info["expert_biases"]:  # gpt-oss: b1 [E, 2I] (gate rows then up) and b2 [E, D]
        biases = {"b1": torch.randn(layer.experts_per_rank, 2 * layer.inter_dim, device=device, generator=gen) * 0.05,
                  "b2": torch.randn(layer.experts_per_rank, layer.model_dim, device=device, generator=gen) * 0.05}
    layer.load_weights(w1, w2, w1s, w2s, layout="halves", **biases)  # drawn as gate rows, then up rows
    router = torch.randn(layer.experts_per_rank, layer.model_dim, device=device, generator=gen) * 0.05
    dense = (dequantize_mxfp4(w1, w1s), dequantize_mxfp4(w2, w2s), biases.get("b1"), biases.get("b2"))
    return MoEBlock(layer, router), dense


def rel_l2(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30)).item()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="kimi_k3_a8w4")
    parser.add_argument("--experts-per-rank", type=int, default=None)
    parser.add_argument("--tokens", default="1,8,128")
    parser.add_argument("--compile", action="store_true", help="run the block under torch.compile(fullgraph=True)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    tokens = [int(t) for t in args.tokens.split(",")]

    device = torch.device("cuda", 0)
    gen = torch.Generator(device=device).manual_seed(args.seed)
    layer = megamoe.Layer(args.config, max_tokens=max(tokens), device=0, experts_per_rank=args.experts_per_rank)
    info = megamoe.config_info(args.config)
    block, dense = random_block(layer, info, device, gen)
    run = torch.compile(block, fullgraph=True) if args.compile else block

    failed = 0
    for t in tokens:
        x = torch.randn(t, layer.model_dim, device=device, generator=gen).to(torch.bfloat16)
        y = run(x)
        ref = reference_block(block, info, x, *dense)
        err = rel_l2(y, ref)
        ok = err <= 0.06 and not layer.take_errors().any()
        failed += not ok
        print(f"{args.config} tokens {t}: relL2 {err:.3e} against plain PyTorch fp32  {'PASS' if ok else 'FAIL'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
