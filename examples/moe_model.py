"""A small PyTorch model of several MoE blocks through one megamoe.Runtime, as an engine holds a
model: one runtime (one workspace) for every MoE layer, each layer its own weights, a residual
stream with an RMS norm before each block; beside it the same model in plain PyTorch fp32, and
each block's output checked against its fp32 twin on the input that block got.

    python examples/moe_model.py [--config qwen3_235b_a8w4] [--experts-per-rank 16] [--layers 4]
                                 [--tokens 1,64,512] [--graph]

--graph captures the whole forward (every layer's call) in one CUDA graph and replays it.
Prints the workspace and weights the model takes (and what one workspace per layer would have
taken), then per token count and layer relL2 against the fp32 twin with PASS/FAIL (0.06). Needs a
GPU and PyTorch.
"""

import argparse
import sys

import torch

import megamoe
from moe_block import random_block, reference_block, rel_l2


class MoEModel(torch.nn.Module):
    """x -> for each block: x + block(rms_norm(x)); every block's experts through one runtime."""

    def __init__(self, blocks):
        super().__init__()
        self.blocks = torch.nn.ModuleList(blocks)

    @staticmethod
    def norm(x):
        h = x.float()
        return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)).to(torch.bfloat16)

    def forward(self, x, trace=None):
        for block in self.blocks:
            h = self.norm(x)
            y = block(h)
            if trace is not None:
                trace.append((h, y))
            x = x + y
        return x


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="qwen3_235b_a8w4")
    parser.add_argument("--experts-per-rank", type=int, default=16)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--tokens", default="1,64,512")
    parser.add_argument("--graph", action="store_true", help="capture the whole forward in one CUDA graph")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    tokens = [int(t) for t in args.tokens.split(",")]

    device = torch.device("cuda", 0)
    gen = torch.Generator(device=device).manual_seed(args.seed)
    runtime = megamoe.Runtime(args.config, max_tokens=max(tokens), device=0, experts_per_rank=args.experts_per_rank,
                              fp8_resident_weights=False)  # a model of many layers: no fp8 copy (docs/layer.md)
    info = megamoe.config_info(args.config)
    blocks, dense = [], []
    for _ in range(args.layers):
        block, twin = random_block(runtime.layer(), info, device, gen)
        blocks.append(block)
        dense.append(twin)
    model = MoEModel(blocks)
    gib = 1 << 30
    weights = sum(b.layer.weights_bytes for b in blocks)
    print(f"{args.config}, {args.layers} MoE layers through one runtime: workspace {runtime.workspace_bytes / gib:.2f} "
          f"GiB once (a runtime per layer: {args.layers * runtime.workspace_bytes / gib:.2f} GiB), weights "
          f"{weights / gib:.2f} GiB")

    failed = 0
    for t in tokens:
        x = torch.randn(t, runtime.model_dim, device=device, generator=gen).to(torch.bfloat16)
        trace = []
        if args.graph:
            runtime.prepare(t)
            static_x = x.clone()
            model(static_x)  # warm-up outside the capture
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                model(static_x, trace)
            static_x.copy_(x)
            graph.replay()
        else:
            model(x, trace)
        torch.cuda.synchronize()
        for l, ((h, y), block, (w1f, w2f, b1, b2)) in enumerate(zip(trace, blocks, dense)):
            err = rel_l2(y, reference_block(block, info, h, w1f, w2f, b1, b2))
            ok = err <= 0.06
            failed += not ok
            print(f"tokens {t} layer {l}: relL2 {err:.3e} against plain PyTorch fp32  {'PASS' if ok else 'FAIL'}")
    if runtime.take_errors().any():
        print("errors reported by the kernels: FAIL")
        failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
