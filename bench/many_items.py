"""Many small items: microseconds per item where the work is per document, per text or per call, side by
side with the anchors, one thread.

    .venv/bin/python bench/many_items.py [--rounds 3] [--no-publish]

The throughput tables time a few large documents; a corpus of JSONL lines, chat records or SFT
examples is hundreds of thousands of small ones, where a fixed cost per item (a kernel call, a rule
worked out again, a file checked by its path) decides the time. Each row runs one workload over the
same items in both tools (the results compared equal before timing), ``--rounds`` passes alternating
the tools, and reports the median pass in microseconds per item and tokenmill's ratio (> 1: tokenmill
is faster). Items: the non-blank lines of the ``en`` corpus (deterministic subsets), as:

* training: ``train_bpe(lines, 8192)`` (split gpt4) against ``rustbpe`` (the same merges);
* GPT-2 lines each ending in ``<|endoftext|>``, ``encode_batch(allowed_special="all")`` against
  tiktoken ``encode(t, allowed_special="all")`` per line;
* Llama 3 chat records (``<|start_header_id|>user<|end_header_id|>\\n\\n{line}<|eot_id|>``) through
  ``from_huggingface`` against HF tokenizers ``encode_batch_fast`` (``RAYON_NUM_THREADS=1``);
* Mistral v3's SentencePiece ``.model`` (751 control pieces) ``encode_batch`` against
  ``sentencepiece``'s ``encode(lines, num_threads=1)``;
* DeepSeek V3's tokenizer.json (an HF Sequence of Splits, 1,283 added tokens) against HF tokenizers;
* ``decode`` of the GPT-2 ids of 2 MB of text, 7 or 200 ids a call and all at once (a list; an int64
  array, which tiktoken takes as its ``tolist()``), against tiktoken;
* Mistral v3's ``.model`` and its tokenizer.json (as tokenmill exports it) decoding 200 ids a call,
  against sentencepiece and HF tokenizers;
* a token store of 500K documents read one document at a time (``store.get(i)`` in a random order)
  against megatron-core's ``IndexedDataset[i]`` on the same store exported with ``export_megatron``.
"""

from __future__ import annotations

import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # (HF tokenizers' batch: one thread, as the others)

import argparse  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
CACHE = ROOT / ".cache"


def lines(count: int) -> list[str]:
    from tokenizer_speed import load_docs

    out = [ln for d in load_docs(str(ROOT.parent / "shared" / "corpora" / "en"), 40) for ln in d.split("\n")
           if ln.strip()]
    return out[:count]


def tiktoken_gpt2(special_tokens: dict):
    """tiktoken's GPT-2 encoding over the same rank file tokenmill reads."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    from tokenizer_speed import GPT2_RANKS

    return tiktoken.Encoding("gpt2", pat_str=r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
                             mergeable_ranks=load_tiktoken_bpe(str(GPT2_RANKS)), special_tokens=special_tokens)


def timed(rounds: int, a, b) -> tuple[float, float]:
    """Median seconds of ``a()`` and ``b()`` over ``rounds`` alternating passes (each warmed once)."""
    a(), b()
    ta, tb = [], []
    for _ in range(rounds):
        for f, acc in ((a, ta), (b, tb)):
            t = time.perf_counter()
            f()
            acc.append(time.perf_counter() - t)
    return statistics.median(ta), statistics.median(tb)


def workloads(tmp: str):
    """``(name, items, anchor name, tokenmill pass, anchor pass, check)`` of each row."""
    from tokenizer_speed import GPT2_RANKS

    from tokenmill import Tokenizer, TokenStore, train_bpe

    text_lines = lines(400_000)
    gpt2 = Tokenizer.from_tiktoken(GPT2_RANKS, pattern="gpt2", special_tokens={"<|endoftext|>": 50256})

    def training():
        import rustbpe

        from tokenmill.tokenizer.pretokenize.patterns import GPT4

        docs = text_lines[:300_000]

        def ours():
            return train_bpe(docs, 8192, progress=False)

        def theirs():
            t = rustbpe.Tokenizer()
            t.train_from_iterator(iter(docs), 8192, pattern=GPT4)
            return t

        def check():
            ranks = theirs().get_mergeable_ranks()
            pairs = sorted(ranks.items() if isinstance(ranks, dict) else ranks, key=lambda br: br[1])
            tok = ours()
            assert [bytes(b) for b, _ in pairs[256:]] == [tok.token_bytes(i) for i in range(256, 256 + len(tok.merges))]

        return "train_bpe, 8192 ids", len(docs), "rustbpe", ours, theirs, check

    def specials():
        enc = tiktoken_gpt2({"<|endoftext|>": 50256})
        texts = [t + "<|endoftext|>" for t in text_lines[:100_000]]

        def ours():
            return gpt2.encode_batch(texts, num_threads=1, allowed_special="all")

        def theirs():
            return [enc.encode(t, allowed_special="all") for t in texts]

        def check():
            assert ours() == theirs()

        return "GPT-2, lines ending in a special token (allowed)", len(texts), "tiktoken", ours, theirs, check

    def hf_rows(folder: str, texts: list[str], name: str, **kw):
        """tokenmill's import of an HF tokenizer.json against HF tokenizers' ``encode_batch_fast``."""
        from tokenizers import Tokenizer as HF

        path = CACHE / folder
        tok, hf = Tokenizer.from_huggingface(path), HF.from_file(str(path / "tokenizer.json"))

        def ours():
            return tok.encode_batch(texts, num_threads=1, **kw)

        def theirs():
            return [e.ids for e in hf.encode_batch_fast(texts, add_special_tokens=False)]

        def check():
            assert ours() == theirs()

        return name, len(texts), "HF tokenizers", ours, theirs, check

    def chat():
        texts = [f"<|start_header_id|>user<|end_header_id|>\n\n{t}<|eot_id|>" for t in text_lines[:50_000]]
        return hf_rows("llama3", texts, "Llama 3 chat records", allowed_special="all")

    def mistral():
        import sentencepiece as spm

        path = CACHE / "mistral" / "mistral_instruct_tokenizer_240323.model.v3"
        tok, sp = Tokenizer.from_sentencepiece(path), spm.SentencePieceProcessor(model_file=str(path))
        texts = text_lines[:100_000]

        def ours():
            return tok.encode_batch(texts, num_threads=1)

        def theirs():
            return sp.encode(texts, num_threads=1)

        def check():
            assert ours() == theirs()

        return "Mistral v3 .model, lines", len(texts), "sentencepiece", ours, theirs, check

    def call_row(name: str, anchor: str, ours_one, theirs_one, calls: list, items: int | None = None):
        """A row of one call an item (a decode, one text's encode): ``ours_one(c)`` against ``theirs_one(c)`` for
        each of ``calls`` (``items``: what a row's microseconds are per; the calls by default)."""
        def ours():
            return [ours_one(c) for c in calls]

        def theirs():
            return [theirs_one(c) for c in calls]

        def check():
            assert ours() == theirs()

        return name, len(calls) if items is None else items, anchor, ours, theirs, check

    def replies(ids: list, most: int) -> list:
        """``ids`` cut into calls of 200 (a generated reply each), at most ``most`` of them."""
        return [ids[i:i + 200] for i in range(0, len(ids) - 199, 200)][:most]

    def mistral_decode():
        import sentencepiece as spm

        path = CACHE / "mistral" / "mistral_instruct_tokenizer_240323.model.v3"
        tok, sp = Tokenizer.from_sentencepiece(path), spm.SentencePieceProcessor(model_file=str(path))
        calls = replies(sp.encode("\n".join(text_lines[:20_000])), 2_000)
        return call_row("Mistral v3 .model, decode 200 ids a call", "sentencepiece", tok.decode, sp.decode, calls)

    def mistral_json_decode():
        from tokenizers import Tokenizer as HF

        path = os.path.join(tmp, "mistral-v3.json")  # the .model's tokenizer.json, as tokenmill exports it
        Tokenizer.from_sentencepiece(CACHE / "mistral" / "mistral_instruct_tokenizer_240323.model.v3") \
            .save_huggingface(path)
        tok, hf = Tokenizer.from_huggingface(path), HF.from_file(path)
        calls = replies(hf.encode("\n".join(text_lines[:20_000]), add_special_tokens=False).ids, 2_000)
        return call_row("Mistral v3 tokenizer.json, decode 200 ids a call", "HF tokenizers", tok.decode,
                          lambda c: hf.decode(c, skip_special_tokens=False), calls)

    def deepseek():
        return hf_rows("deepseek", text_lines[:30_000], "DeepSeek V3, lines")

    def mistral_one():
        import sentencepiece as spm

        path = CACHE / "mistral" / "mistral_instruct_tokenizer_240323.model.v3"
        tok, sp = Tokenizer.from_sentencepiece(path), spm.SentencePieceProcessor(model_file=str(path))
        return call_row("Mistral v3 .model, one line a call", "sentencepiece", tok.encode_ordinary, sp.encode,
                            text_lines[:20_000])

    def mistral_json_one():
        from tokenizers import Tokenizer as HF

        path = os.path.join(tmp, "mistral-v3-one.json")
        Tokenizer.from_sentencepiece(CACHE / "mistral" / "mistral_instruct_tokenizer_240323.model.v3") \
            .save_huggingface(path)
        tok, hf = Tokenizer.from_huggingface(path), HF.from_file(path)
        return call_row("Mistral v3 tokenizer.json, one line a call", "HF tokenizers", tok.encode_ordinary,
                            lambda t: hf.encode(t, add_special_tokens=False).ids, text_lines[:20_000])

    def llama3_one():
        from tokenizers import Tokenizer as HF

        path = CACHE / "llama3" / "tokenizer.json"
        tok, hf = Tokenizer.from_huggingface(path), HF.from_file(str(path))
        return call_row("Llama 3 tokenizer.json, one line a call", "HF tokenizers", tok.encode_ordinary,
                            lambda t: hf.encode(t, add_special_tokens=False).ids, text_lines[:20_000])

    def decode_short():
        calls = [x[:7] for x in gpt2.encode_batch(text_lines[:20_000], num_threads=1) if x]
        return call_row("decode, 7 ids a call", "tiktoken", gpt2.decode, tiktoken_gpt2({}).decode, calls)

    def decode_reply():
        calls = replies(gpt2.encode("\n".join(text_lines[:40_000])), 5_000)
        return call_row("decode, 200 ids a call (a generated reply)", "tiktoken", gpt2.decode,
                          tiktoken_gpt2({}).decode, calls)

    def decode_long():
        ids = gpt2.encode("\n".join(text_lines[:40_000]))
        return call_row("decode, one call (per id)", "tiktoken", gpt2.decode, tiktoken_gpt2({}).decode, [ids],
                          len(ids))

    def decode_array():
        import numpy as np

        ids = np.array(gpt2.encode("\n".join(text_lines[:40_000])), np.int64)
        enc = tiktoken_gpt2({})
        return call_row("decode, one call of an int64 array (per id)", "tiktoken", gpt2.decode,
                          lambda a: enc.decode(a.tolist()), [ids], ids.size)  # (tiktoken takes a list)

    def store_get():
        import numpy as np
        from megatron.core.datasets.indexed_dataset import IndexedDataset

        from tokenmill.data.megatron import export_megatron

        rng = np.random.default_rng(0)
        lengths = rng.integers(1, 60, 500_000)
        ids = rng.integers(0, 50_000, int(lengths.sum()))
        store = TokenStore.from_token_arrays(os.path.join(tmp, "s"), [(lengths, ids)], vocab_size=50_257)
        prefix = os.path.join(tmp, "m")
        export_megatron(store, prefix)
        mg = IndexedDataset(prefix)
        order = list(range(len(store)))
        random.Random(0).shuffle(order)

        def ours():
            return [store.get(i) for i in order]

        def theirs():
            return [mg[i] for i in order]

        def check():
            assert all(np.array_equal(store.get(i), mg[i]) for i in order[:20_000])

        return "token store, one document a read", len(order), "megatron-core IndexedDataset", ours, theirs, check

    return [training, specials, chat, mistral, deepseek, mistral_one, mistral_json_one, llama3_one, decode_short, decode_reply, decode_long, decode_array,
            mistral_decode, mistral_json_decode, store_get]


def _us(v: float) -> str:
    """Microseconds with two decimals, three below 0.1 (an id's share of a long decode)."""
    return f"{v:.3f}" if v < 0.1 else f"{v:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="example: .venv/bin/python bench/many_items.py --rounds 3")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-publish", action="store_true")
    ap.add_argument("--only", default="", help="run only the rows whose name holds this text (not published)")
    a = ap.parse_args()
    rows, results = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for make in workloads(tmp):
            name, n, anchor, ours, theirs, check = make()
            if a.only not in name:
                continue
            check()
            t_ours, t_theirs = timed(a.rounds, ours, theirs)
            r = dict(workload=name, items=n, anchor=anchor, tokenmill_us=t_ours / n * 1e6,
                     anchor_us=t_theirs / n * 1e6, ratio=t_theirs / t_ours)
            results.append(r)
            rows.append(f"| {name} | {n:,d} | {anchor} | {_us(r['tokenmill_us'])} | {_us(r['anchor_us'])} | "
                        f"**{r['ratio']:.2f}x** |")
            print(rows[-1], flush=True)
    md = ("One thread, microseconds per item (median of " + str(a.rounds) + " passes, the tools alternating; results "
          "compared equal before timing; ratio > 1: tokenmill is faster):\n\n"
          "| workload | items | anchor | tokenmill (us/item) | anchor (us/item) | anchor / tokenmill |\n"
          "|---|---:|---|---:|---:|---:|\n" + "\n".join(rows))
    print(md)
    if not a.no_publish and not a.only:
        from _results import publish

        publish("many-items", {"rows": results}, md)


if __name__ == "__main__":
    main()
