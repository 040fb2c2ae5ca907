#!/usr/bin/env python3
"""bench_torch.py - the PyTorch (sentence-transformers) side of the engine
benchmark: the same shapes as bench_engine (batches of 1, 32, 256 sequences of
exactly 32 and 128 tokens, [CLS] + random word-piece ids + [SEP], pre-tokenized
so tokenization is not timed), the same thread count (torch.set_num_threads),
eager mode, inference_mode.  CPU: fp32.  --device cuda: bf16 or fp16 weights.

usage: bench_torch.py [--threads N] [--device cpu|cuda] [--dtype fp32|bf16|fp16]
                      [--min-time S] [--batches 1,32,256] [--lens 32,128] [--model DIR]
Lines starting with RESULT are parsed by run.sh.
"""
import argparse
import os
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default=None)
    ap.add_argument("--min-time", type=float, default=2.0)
    ap.add_argument("--batches", default="1,32,256")
    ap.add_argument("--lens", default="32,128")
    ap.add_argument("--model", default=os.environ.get(
        "RD_MODEL_DIR", os.path.join(ROOT, "models", "all-MiniLM-L6-v2")))
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import sentence_transformers
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(a.threads)
    dtype = a.dtype or ("fp32" if a.device == "cpu" else "bf16")
    tdt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    model = SentenceTransformer(a.model, device=a.device)
    model = model.to(tdt).eval()
    batches = [int(x) for x in a.batches.split(",")]
    lens = [int(x) for x in a.lens.split(",")]
    g = torch.Generator().manual_seed(12345)
    path = "torch-" + a.device + "-" + dtype
    print("# sentence-transformers %s, torch %s, %s, threads %d"
          % (sentence_transformers.__version__, torch.__version__, path, torch.get_num_threads()))
    print("# %-18s %5s %5s %12s %12s %8s" % ("path", "batch", "seq", "sentences/s", "tokens/s", "iters"))

    def sync():
        if a.device == "cuda":
            torch.cuda.synchronize()

    with torch.inference_mode():
        for L in lens:
            for B in batches:
                ids = torch.randint(1996, 1996 + 27000, (B, L), generator=g)
                ids[:, 0] = 101
                ids[:, -1] = 102
                feats = {"input_ids": ids.to(a.device),
                         "attention_mask": torch.ones(B, L, dtype=torch.long, device=a.device),
                         "token_type_ids": torch.zeros(B, L, dtype=torch.long, device=a.device)}
                # warm-up: on a GPU at the timed shape, so kernel selection is not timed
                warm = feats if a.device == "cuda" else {k: v[: min(B, 8)] for k, v in feats.items()}
                model(dict(warm))
                sync()
                iters = 0
                t0 = time.perf_counter()
                while True:
                    out = model(dict(feats))["sentence_embedding"]
                    sync()
                    iters += 1
                    el = time.perf_counter() - t0
                    if el >= a.min_time or iters >= 1000:
                        break
                assert out.shape == (B, 384)
                sps = B * iters / el
                print("  %-18s %5d %5d %12.1f %12.0f %8d" % (path, B, L, sps, sps * L, iters))
                print("RESULT impl=torch path=%s threads=%d batch=%d seq=%d sent_s=%.3f tok_s=%.1f"
                      % (path, a.threads, B, L, sps, sps * L), flush=True)


if __name__ == "__main__":
    main()
