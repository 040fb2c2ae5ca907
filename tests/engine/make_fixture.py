#!/usr/bin/env python3
"""make_fixture.py - expected token ids and embeddings for the engine's tests.

Runs the reference implementation (sentence-transformers on PyTorch, CPU, fp32)
on a fixed set of real sentences (WordNet glosses, fortunes) plus edge cases,
and writes tests/engine/fixtures/:
  minilm_sentences.txt  one sentence per line, bytes < 0x20, 0x7f and '\\'
                        written as \\xHH; other bytes raw (some lines are
                        deliberately invalid UTF-8)
  minilm_ids.txt        the reference token ids of each sentence, one line each
  minilm_emb.f32        "RDEMB001", u32 count, u32 dim, then count x dim float32 LE
  minilm_meta.txt       versions used
Invalid UTF-8 is given to the reference as bytes.decode("utf-8", "replace"),
which is the engine's defined behaviour.  CI does not run this script; its
output is committed.

Usage: .venv/bin/python tests/engine/make_fixture.py [model_dir]
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def wordnet_glosses(limit):
    out = []
    for part, step in (("noun", 331), ("verb", 97), ("adj", 151), ("adv", 23)):
        path = "/usr/share/wordnet/data." + part
        with open(path, encoding="latin-1") as f:
            lines = [l for l in f if not l.startswith(" ")]
        for i in range(0, len(lines), step):
            if "| " in lines[i]:
                g = lines[i].split("| ", 1)[1].strip()
                if g:
                    out.append(g)
    out = out[:limit]
    return [g.encode("utf-8") for g in out]


def fortunes(limit):
    out = []
    for name in ("fortunes", "literature", "riddles"):
        path = "/usr/share/games/fortunes/" + name
        with open(path, "rb") as f:
            items = [x.strip(b"\n") for x in f.read().split(b"\n%\n")]
        out.extend(x for x in items[::3] if x.strip())
    return out[:limit]


def edge_cases(long_text):
    e = [
        "",
        "   ",
        "\t\n\r",
        "Hello, world!",
        "Café crème brûlée à la française",
        "naïve coöperation résumé Zürich São Paulo Ångström",
        "Straße und Fußgänger",
        "İstanbul ıi ĲĳŒœ",
        "ΣΊΣΥΦΟΣ and σοφία are Greek; Москва is Russian",
        "我爱北京天安门 and 東京 and 中文",
        "안녕하세요 세계",
        "日本語のテキストとカタカナ",
        "I ❤️ NY 🎉🎉 👍🏽",
        "Hello!!!...??? (parentheses) [brackets] {braces} <angles>",
        "don't won't it's U.S.A. e.g. i.e. Mr. Smith's",
        "3.14159 1,000,000 $100 50% #hashtag @user a+b=c ~tilde `tick` ^caret |pipe",
        "ctrl\x00chars\x07here\x1b[0m and\x7fdel",
        "zero\u200bwidth\u200dspace soft\u00adhyphen",
        "no\u00a0break\u3000ideographic\u2003em space",
        "combining e\u0301 and a\u0308 and n\u0303",
        "ＦＵＬＬＷＩＤＴＨ ｌｅｔｔｅｒｓ １２３",
        "a" * 150 + " long word",
        "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
        "email: someone@example.com url: https://example.org/path?q=1&r=2",
        "MiXeD CaSe WoRdS AND SHOUTING",
        "\u2018curly quotes\u2019 \u201cdouble\u201d \u2014 em dash \u2026 ellipsis",
        "emoji only 😀😃😄😁",
        "math ∑ ∫ √ ∞ ≠ ≤ ≥ ± × ÷",
        "Ελληνικά Русский العربية עברית हिन्दी ไทย",
        long_text,
        " ".join(["token"] * 400),
    ]
    out = [s.encode("utf-8") for s in e]
    out += [
        b"caf\xc3 invalid \xff\xfe bytes \xe2\x82 end",
        b"\xed\xa0\x80 surrogate \xc0\xaf overlong \xf4\x90\x80\x80 too big",
        b"truncated at the end \xe2\x82",
        b"\x80\x80\x80 lone continuation bytes",
        b"valid \xc3\xa9t\xc3\xa9 then \xc3",
    ]
    return out


def escape(b):
    o = bytearray()
    for c in b:
        if c < 0x20 or c == 0x7F or c == 0x5C:
            o += b"\\x%02x" % c
        else:
            o.append(c)
    return bytes(o)


def main():
    model_dir = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
        "RD_MODEL_DIR", os.path.join(ROOT, "models", "all-MiniLM-L6-v2"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np
    import torch
    import sentence_transformers
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(2)
    glosses = wordnet_glosses(170)
    forts = fortunes(60)
    long_text = " ".join(g.decode() for g in glosses[:40])
    sents = glosses + forts + edge_cases(long_text)
    texts = [s.decode("utf-8", "replace") for s in sents]

    model = SentenceTransformer(model_dir, device="cpu")
    model.max_seq_length = 256
    ids = []
    for t in texts:
        enc = model.tokenize([t])
        n = int(enc["attention_mask"][0].sum())
        ids.append([int(x) for x in enc["input_ids"][0][:n]])
    emb = model.encode(texts, batch_size=16, convert_to_numpy=True).astype(np.float32)
    assert emb.shape == (len(sents), 384)

    # the reference tokenizer sees the same ids the model embeds
    out = os.path.join(HERE, "fixtures")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "minilm_sentences.txt"), "wb") as f:
        for s in sents:
            f.write(escape(s) + b"\n")
    with open(os.path.join(out, "minilm_ids.txt"), "w") as f:
        for row in ids:
            f.write(" ".join(map(str, row)) + "\n")
    with open(os.path.join(out, "minilm_emb.f32"), "wb") as f:
        f.write(b"RDEMB001" + struct.pack("<II", emb.shape[0], emb.shape[1]))
        f.write(emb.astype("<f4").tobytes())
    with open(os.path.join(out, "minilm_meta.txt"), "w") as f:
        f.write("sentences %d (glosses %d, fortunes %d, edge cases %d)\n"
                % (len(sents), len(glosses), len(forts), len(sents) - len(glosses) - len(forts)))
        f.write("sentence-transformers %s, torch %s, numpy %s, fp32 CPU, max_seq_length 256\n"
                % (sentence_transformers.__version__, torch.__version__, np.__version__))
        f.write("tokens max %d, mean %.1f\n" % (max(map(len, ids)), sum(map(len, ids)) / len(ids)))
    print("wrote %d sentences to %s" % (len(sents), out))


if __name__ == "__main__":
    main()
