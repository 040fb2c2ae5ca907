#!/usr/bin/env python3
"""torch_half_accuracy.py - how close PyTorch's own model, run whole in bf16
or fp16 (residual stream included, as the engine's RD_GPU_T_RESIDUAL=1 does),
comes to the fp32 fixture the engine tests use: the worst cosine over the
fixture's sentences.  It tells what accuracy a half-precision residual can
reach before a GPU run measures the engine's own.

usage: .venv/bin/python bench/engine/torch_half_accuracy.py [--model DIR] [--threads N]
(needs torch and sentence-transformers, as bench_torch.py; runs on the CPU)
"""
import argparse
import os
import sys

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIX = os.path.join(ROOT, "tests", "engine", "fixtures")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "all-MiniLM-L6-v2"))
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    ids = [list(map(int, line.split())) for line in open(os.path.join(FIX, "minilm_ids.txt"))]
    raw = open(os.path.join(FIX, "minilm_emb.f32"), "rb").read()
    if raw[:8] != b"RDEMB001":
        sys.exit("minilm_emb.f32: not an RDEMB001 fixture")
    ref = np.frombuffer(raw[16:], dtype="<f4").reshape(len(ids), -1)
    bert = SentenceTransformer(a.model, device="cpu")[0].auto_model
    for dt in (torch.float32, torch.bfloat16, torch.float16):
        model = bert.to(dt)
        worst, where = 1.0, -1
        with torch.inference_mode():
            for i, x in enumerate(ids):
                t = torch.tensor([x])
                h = model(input_ids=t, attention_mask=torch.ones_like(t)).last_hidden_state[0].float()
                e = h.mean(0)
                e = (e / e.norm()).numpy()
                c = float(np.dot(e, ref[i]) / np.linalg.norm(ref[i]))
                if c < worst:
                    worst, where = c, i
        print("%-14s worst cosine vs the fp32 fixture over %d sentences: %.6f (sentence %d)"
              % (str(dt).replace("torch.", ""), len(ids), worst, where))


if __name__ == "__main__":
    main()
