"""bench/vs_ray/ray_batch.py - Ray's side of the batch-inference comparison.

Embeds the same corpus as examples/batch_embed.c (same texts, same order,
same --limit) with all-MiniLM-L6-v2 through sentence-transformers, in a Ray
Data pipeline: from_items -> map_batches with an actor pool of --replicas
actors of --cpus-per-replica CPUs each (torch limited to
--threads-per-replica threads), --batch rows per call, order preserved, the
embeddings collected and written to --out as .npy.  Timed like batch_embed:
from before the pool starts (after ray.init and reading the corpus) to the
written file.  Prints batch_embed's summary line:
  summary: items=N seconds=S items_per_s=R mode=ray-data replicas=N batch=N

    python ray_batch.py --corpus wordnet|fortunes|PATH --out OUT.npy
        [--replicas 2] [--cpus-per-replica 1] [--threads-per-replica 1]
        [--batch 64] [--limit N] [--model DIR] [--num-cpus 2]
"""

import argparse
import os
import sys
import time

WORDNET = "/usr/share/wordnet"
FORTUNES = "/usr/share/games/fortunes"


def _clean(b):
    """batch_embed's trimming: trailing \\n, space, \\r; leading space, \\n."""
    b = b.rstrip(b"\n \r").lstrip(b" \n")
    return b.decode("utf-8", errors="replace") if b else None


def load_wordnet():
    """The gloss after the first "| " on each synset line of data.<pos>."""
    out = []
    for pos in ("noun", "verb", "adj", "adv"):
        path = "%s/data.%s" % (WORDNET, pos)
        if not os.path.exists(path):
            continue
        with open(path, "rb") as f:
            for line in f:
                if line.startswith(b" "):  # license header
                    continue
                bar = line.find(b"| ")
                if bar < 0:
                    continue
                t = _clean(line[bar + 2 :])
                if t:
                    out.append(t)
    if not out:
        sys.exit("ray_batch.py: WordNet is not installed (%s/data.*)" % WORDNET)
    return out


def load_fortunes():
    """Cookies separated by lines holding a single '%', files in byte order,
    skipping .dat and .u8 files."""
    names = sorted(
        n
        for n in os.listdir(FORTUNES)
        if not n.startswith(".") and not n.endswith(".dat") and not n.endswith(".u8")
    )
    out = []
    for n in names:
        path = os.path.join(FORTUNES, n)
        if not os.path.isfile(path):
            continue
        cookie = b""
        with open(path, "rb") as f:
            for line in f:
                if line == b"%\n":
                    t = _clean(cookie)
                    if t:
                        out.append(t)
                    cookie = b""
                else:
                    cookie += line
        t = _clean(cookie)
        if t:
            out.append(t)
    return out


def load_file(path):
    out = []
    with open(path, "rb") as f:
        for line in f:
            t = _clean(line)
            if t:
                out.append(t)
    return out


class Embedder:
    """One replica: the model loaded once, torch limited to `threads`."""

    def __init__(self, model_dir, threads):
        os.environ["HF_HUB_OFFLINE"] = "1"
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        self.model = SentenceTransformer(model_dir, device="cpu")

    def __call__(self, batch):
        texts = list(batch["text"])
        emb = self.model.encode(texts, batch_size=len(texts), convert_to_numpy=True)
        return {"emb": emb}


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--cpus-per-replica", type=float, default=1)
    ap.add_argument("--threads-per-replica", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--model", default=os.path.join(root, "models", "all-MiniLM-L6-v2"))
    ap.add_argument("--num-cpus", type=int, default=2)
    a = ap.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"

    if a.corpus == "wordnet":
        texts = load_wordnet()
    elif a.corpus == "fortunes":
        texts = load_fortunes()
    else:
        texts = load_file(a.corpus)
    if a.limit and a.limit < len(texts):
        texts = texts[: a.limit]

    import numpy as np
    import ray
    import ray.data

    ray.init(
        num_cpus=a.num_cpus,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"HF_HUB_OFFLINE": "1"}},
    )
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True  # batch_embed writes rows in corpus order
    ctx.enable_progress_bars = False

    t0 = time.perf_counter()
    ds = ray.data.from_items([{"text": t} for t in texts])
    ds = ds.map_batches(
        Embedder,
        fn_constructor_kwargs={"model_dir": a.model, "threads": a.threads_per_replica},
        batch_size=a.batch,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=a.replicas),
        num_cpus=a.cpus_per_replica,
    )
    parts = [b["emb"] for b in ds.iter_batches(batch_size=None, batch_format="numpy")]
    emb = np.concatenate(parts).astype(np.float32, copy=False)
    np.save(a.out, emb)
    wall = time.perf_counter() - t0
    ray.shutdown()
    if emb.shape[0] != len(texts):
        sys.exit("ray_batch.py: %d embeddings for %d texts" % (emb.shape[0], len(texts)))
    print(
        "summary: items=%d seconds=%.3f items_per_s=%.1f mode=ray-data replicas=%d batch=%d"
        % (len(texts), wall, len(texts) / wall, a.replicas, a.batch)
    )


if __name__ == "__main__":
    main()
