"""Tokenizers: byte-level BPE (trained here or imported exactly) and the SentencePiece BPE family.

* ``model``: :class:`Tokenizer`, a :class:`~tokenmill.tokenizer.spec.TokenizerSpec` (``spec``: the
  tokenizer as immutable data) plus its encoding (``encoding``: special and added tokens, then the
  compiled encoder) and decoding;
* ``formats/``: the files a spec is read from and written to (tokenmill's own, tiktoken rank files,
  tekken.json, tokenizer.json, exports);
* ``pretokenize/``: splitting text into chunks (presets, the Llama 3 / Qwen family, any regex of the
  tokenizer family compiled);
* ``bpe/``: training merges and encoding with them (kernels and their Python twins);
* ``sentencepiece`` (+ ``sp_encoder``, ``sp_huggingface``): SentencePiece ``.model`` files and that
  family's tokenizer.json;
* ``special``, ``added``: special tokens (tiktoken's safety model) and HF added tokens;
* ``adapters``, ``foreign``: ``as_tokenizer`` (any tokenizer object or file) and tokenizers run
  through their own library.

Names are loaded on first use, so importing this package loads no compiler.
"""

from __future__ import annotations

from .._lazy import lazy_exports

_EXPORTS = {
    "Tokenizer": ".model",
    "TokenizerSpec": ".spec",
    "MergeTrace": ".spec",
    "train_bpe": ".bpe.train",
    "SentencePieceTokenizer": ".sentencepiece",
    "ForeignTokenizer": ".foreign",
    "as_tokenizer": ".adapters",
    "TokenizerLike": ".adapters",
    "replace_surrogates": ".surrogates",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, globals(), _EXPORTS)
