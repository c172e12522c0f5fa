"""A tokenizer tokenmill cannot reproduce exactly, run through its own library (HF tokenizers,
tiktoken, sentencepiece) behind the protocol every stage uses. Below the importers and adapters,
which all hand such tokenizers out."""

from __future__ import annotations

import hashlib

from ..errors import ConfigError


class ForeignTokenizer:
    """A tokenizer tokenmill cannot reproduce exactly, called through its own batch encode.

    Special tokens follow tokenmill's safety model: text spelling one raises unless allowed; allowed
    ones are encoded by the wrapped tokenizer (which recognises them itself)."""

    def __init__(self, kind: str, obj, *, vocab_size: int, special_tokens: dict[str, int], content_hash: str,
                 encode_fn, decode_fn, token_bytes_fn, joined_bytes: bool = False, reads_specials: bool = True):
        self.kind = kind
        # whether the wrapped tokenizer can read special tokens in text (sentencepiece cannot: allowing them is
        # then refused only where a text spells one)
        self._reads_specials = reads_specials
        self.wrapped = obj
        self._vocab_size = vocab_size
        self._special = dict(special_tokens)
        self._hash = content_hash
        self._encode_fn = encode_fn  # (texts, with_specials) -> list[list[int]]
        self._decode_fn = decode_fn
        self._token_bytes_fn = token_bytes_fn
        # decode_bytes as the decoded text's UTF-8 (a tokenizer whose tokens' text depends on their neighbours:
        # WordPiece's "##", Metaspace's leading space), not the tokens' bytes joined
        self._joined_bytes = joined_bytes

    @classmethod
    def from_hf(cls, hf, body: str, source: str = "the HF tokenizer") -> "ForeignTokenizer":
        plain = plain_hf(hf, source)  # (its truncation or padding had reached every encode: documents cut to
        if plain is not hf:           # max_length, pad ids stored as tokens)
            hf, body = plain, plain.to_str()
        specials = {t.content: i for i, t in hf.get_added_tokens_decoder().items() if t.special}

        def enc(texts, with_specials):
            old = hf.encode_special_tokens
            hf.encode_special_tokens = not with_specials
            try:
                return [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
            finally:
                hf.encode_special_tokens = old

        added = {i: t.content for i, t in hf.get_added_tokens_decoder().items()}
        byte_level = _byte_level(body)
        if byte_level:  # each vocabulary token spells its raw bytes, one character a byte
            from .formats.export import bytes_to_unicode

            byte_of = {c: b for b, c in bytes_to_unicode().items()}

            def token_bytes(i):
                if i in added:
                    return added[i].encode("utf-8")
                piece = hf.id_to_token(i)
                if piece is None:
                    raise ConfigError(f"token id {i:,d} is not in the vocabulary (0 .. {hf.get_vocab_size() - 1:,d})")
                return bytes(byte_of[c] for c in piece) if all(c in byte_of for c in piece) else piece.encode("utf-8")
        else:  # WordPiece, Metaspace, byte fallback...: a token's text depends on its neighbours
            def token_bytes(i):
                return hf.decode([i], skip_special_tokens=False).encode("utf-8")

        return cls("tokenizers", hf, vocab_size=hf.get_vocab_size(), special_tokens=specials,
                   content_hash=hashlib.sha256(body.encode("utf-8")).hexdigest(),
                   encode_fn=enc, decode_fn=lambda ids: hf.decode(list(ids), skip_special_tokens=False),
                   token_bytes_fn=token_bytes, joined_bytes=not byte_level)

    @classmethod
    def from_tiktoken(cls, e) -> "ForeignTokenizer":
        h = hashlib.sha256(e._pat_str.encode())
        for b, r in sorted(e._mergeable_ranks.items(), key=lambda kv: kv[1]):
            h.update(b"%d:" % r + b)
        for s, r in sorted(e._special_tokens.items()):
            h.update(b"%d=" % r + s.encode())

        def enc(texts, with_specials):
            if with_specials:
                return e.encode_batch(list(texts), allowed_special="all")
            return e.encode_ordinary_batch(list(texts))

        return cls("tiktoken", e, vocab_size=e.n_vocab, special_tokens=dict(e._special_tokens),
                   content_hash=h.hexdigest(), encode_fn=enc,
                   decode_fn=lambda ids: e.decode_bytes(list(ids)).decode("utf-8", "replace"),
                   token_bytes_fn=e.decode_single_token_bytes)

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @property
    def special_tokens(self) -> dict[str, int]:
        return dict(self._special)

    @property
    def content_hash(self) -> str:
        return self._hash

    def _check(self, texts, allowed_special, disallowed_special) -> bool:
        allowed = set(self._special) if allowed_special == "all" else set(allowed_special)
        disallowed = set(self._special) if disallowed_special == "all" else set(disallowed_special)
        from ..errors import SpecialTokenError

        advice = "pass allowed_special='all' or disallowed_special=()" if self._reads_specials else (
            f"pass disallowed_special=() to encode it as text ({self.kind} cannot read special tokens in text; "
            "add their ids yourself)")
        for t in texts:
            for s in sorted(disallowed - allowed):
                if s in t:
                    found = f"the text contains the special token {s!r} at character {t.index(s):,d}"
                    raise SpecialTokenError(f"{found}; {advice}", found)
        if allowed and not self._reads_specials:  # (allowed, and no text spells one: nothing to read)
            for t in texts:
                for s in sorted(allowed):
                    if s in t:
                        raise ConfigError(f"the text contains the special token {s!r} at character {t.index(s):,d}, "
                                          f"but a model run through {self.kind} never reads special tokens in text; "
                                          "pass disallowed_special=() to encode it as text, or add the ids yourself")
            return False
        if allowed and allowed != set(self._special):
            raise ConfigError(f"a wrapped {self.kind} tokenizer allows all special tokens or none; "
                              "pass allowed_special='all' or ()")
        return bool(allowed)

    def encode(self, text: str, *, allowed_special=(), disallowed_special="all") -> list[int]:
        if not isinstance(text, str):
            raise ConfigError(f"text is a {type(text).__name__}; encode takes a str (decode bytes first: "
                              "data.decode('utf-8'))")
        return self.encode_batch([text], allowed_special=allowed_special, disallowed_special=disallowed_special)[0]

    def encode_ordinary(self, text: str) -> list[int]:
        return self.encode(text, disallowed_special=())

    def encode_batch(self, texts, *, num_threads=None, as_arrays=False, allowed_special=(),
                     disallowed_special="all") -> list:
        import numpy as np

        from .groups import batch_args
        from .surrogates import batch_surrogate_error

        texts, _, as_arrays = batch_args(texts, num_threads, as_arrays)
        bad = batch_surrogate_error(texts)  # (as every tokenmill encode: the wrapped library had raised a TypeError
        if bad is not None:                 # of its own, or replaced it in silence)
            raise bad
        out = self._encode_fn(texts, self._check(texts, allowed_special, disallowed_special))
        return [np.asarray(ids, np.int64) for ids in out] if as_arrays else [list(ids) for ids in out]

    def decode(self, ids, errors: str = "replace", *, skip_special_tokens: bool = False) -> str:
        from .._validate import check_decode_errors, check_ids
        from .special import without_special_ids

        check_decode_errors(errors)
        ids = self._in_range(check_ids(without_special_ids(ids, self._special, skip_special_tokens)))
        if errors == "replace":
            return self._decode_fn(ids)
        if self._joined_bytes or self.kind == "sentencepiece":  # (the library makes the text; its bytes are not at hand)
            raise ConfigError(f"errors={errors!r}: a tokenizer run through {self.kind} decodes into text itself (bytes "
                              "that are no UTF-8 become U+FFFD there), so only errors='replace' is what it gives; "
                              "pass errors='replace'")
        return b"".join(self.token_bytes(i) for i in ids).decode("utf-8", errors)  # (byte-level: its tokens' bytes)

    def _in_range(self, ids: list[int]) -> list[int]:
        """``ids`` where each is below the vocabulary size, else an UnknownTokenError (a KeyError) naming the first
        that is not, as tokenmill's own tokenizers say (HF's decode had left such an id out without a word)."""
        import numpy as np

        from ..errors import UnknownTokenError

        a = np.asarray(ids, np.int64)
        bad = (a < 0) | (a >= self._vocab_size)
        if bad.any():
            raise UnknownTokenError(f"token id {int(a[np.argmax(bad)])} is out of range for "
                                    f"vocab_size={self._vocab_size:,d}")
        return ids

    def decode_bytes(self, ids) -> bytes:
        from .._validate import check_ids

        ids = self._in_range(check_ids(ids))
        if self._joined_bytes:
            return self._decode_fn(ids).encode("utf-8", "surrogatepass")
        return b"".join(self.token_bytes(i) for i in ids)

    def token_bytes(self, token_id: int) -> bytes:
        return self._token_bytes_fn(int(token_id))

    def save_pretrained(self, *args, **kwargs):
        """Refused, as ``to_transformers``, ``save_huggingface``, ``to_tiktoken``, ``save_tiktoken`` and ``save``:
        tokenmill does not run this tokenizer itself, so it has no file of tokenmill's making to write (the message
        says where its own is)."""
        raise ConfigError(self._no_export())

    to_transformers = save_huggingface = to_tiktoken = save_tiktoken = save = save_pretrained

    def _no_export(self) -> str:
        own = {"tokenizers": "tok.wrapped.save('tokenizer.json') (HF tokenizers' own file), or "
                             "PreTrainedTokenizerFast(tokenizer_object=tok.wrapped)",
               "tiktoken": "it is a tiktoken Encoding already (tok.wrapped), with tiktoken's own rank file",
               "sentencepiece": "its .model file"}.get(self.kind, "the files it was read from")
        return (f"this tokenizer is run through {self.kind} (tokenmill cannot reproduce it exactly), so tokenmill "
                f"writes no file of it; keep or save it with its own library: {own}")

    def __repr__(self) -> str:
        return f"ForeignTokenizer({self.kind}, vocab_size={self.vocab_size:,d}, special_tokens={len(self._special)})"


def _byte_level(body: str) -> bool:
    """Whether a tokenizer.json decodes with ``ByteLevel`` (alone or in a ``Sequence``): its vocabulary
    spells raw bytes one character each (GPT-2's table)."""
    import json

    def types(d) -> list:
        if not isinstance(d, dict):
            return []
        return [d.get("type")] + [t for x in (d.get("decoders") or []) for t in types(x)]

    try:
        return "ByteLevel" in types(json.loads(body).get("decoder"))
    except (ValueError, AttributeError):
        return False


def plain_hf(hf, source: str):
    """``hf`` (a ``tokenizers.Tokenizer``), or, where it truncates or pads (a transformers tokenizer just called
    with ``truncation=True`` keeps it on its backend; ``enable_padding``), a copy that does neither, with the
    warning a tokenizer.json that enables them gets: tokenmill's ids are every id of a text, unpadded. The
    user's object is left as it is."""
    from .formats.huggingface import not_applied_of, warn_not_applied

    dropped = not_applied_of(hf)
    if not dropped:
        return hf
    from tokenizers import Tokenizer as HFTokenizer

    copy = HFTokenizer.from_str(hf.to_str())
    copy.no_truncation()
    copy.no_padding()
    warn_not_applied(source, dropped)
    return copy
