"""HF ``tokenizers``' vocabulary names on tokenmill's tokenizers: ``get_vocab``, ``token_to_id``,
``id_to_token``, ``get_vocab_size`` and ``len(tok)``, and ``transformers``' ``convert_tokens_to_ids`` /
``convert_ids_to_tokens``.

Code written for a ``tokenizers.Tokenizer`` (or a ``transformers`` fast tokenizer) names tokens by the
strings a tokenizer.json spells them with. A tokenmill tokenizer gives the same strings:

* a byte-level BPE token (``Tokenizer``): its bytes in GPT-2's byte-to-unicode alphabet (``Ġthe`` for
  `` the``), as Llama 3's, Qwen's and DeepSeek's tokenizer.json hold them and ``save_huggingface``
  writes them;
* a SentencePiece piece: as the model spells it (``▁the``, ``<0x0A>``, ``<s>``);
* a special or added token: its text (``<|endoftext|>``).

>>> from tokenmill import Tokenizer
>>> tok = Tokenizer.from_merges([(32, 104)], pattern="gpt2", special_tokens=["<|endoftext|>"])
>>> tok.token_to_id("Ġh"), tok.id_to_token(256), tok.token_to_id("<|endoftext|>"), tok.token_to_id("nope")
(256, 'Ġh', 257, None)
>>> len(tok), tok.get_vocab_size(), tok.get_vocab_size(with_added_tokens=False)
(258, 258, 257)

Where ids are dense, everything equals HF's (``tests/tokenizer/test_vocab_names.py`` compares them with
HF ``tokenizers`` on Llama 3's, DeepSeek's and exported tokenizer.json files). One deliberate difference:
``len(tok)`` and ``get_vocab_size()`` are the id range, ``vocab_size`` (1 + the largest id: the rows an
embedding needs), where HF counts entries, fewer where the ids have gaps (cl100k's specials sit after
unassigned ids: HF counts 100,261 tokens, and ``<|endofprompt|>`` is id 100,276), so that
``nn.Embedding(len(tok), dim)`` holds every id. A string two vocabulary ids both spell (two merges made
the same bytes, which a trained tokenizer can hold) names the lower id.
"""

from __future__ import annotations

import functools
import numbers

from .._validate import check_token_id
from ..errors import ConfigError


class VocabNames:
    """The names above, over ``_hf_tokens()`` (each class's): ``(model, added)``, ``model`` id -> the
    string of each vocabulary token, by id; ``added`` special and added tokens' text -> id."""

    def _hf_tokens(self) -> tuple[dict[int, str], dict[str, int]]:
        raise NotImplementedError

    @functools.cached_property
    def _hf_names(self) -> tuple[dict[int, str], dict[str, int], dict[str, int], dict[int, str]]:
        model, added = self._hf_tokens()
        by_string: dict[str, int] = {}
        for i, s in model.items():
            by_string.setdefault(s, i)
        return model, added, by_string, {i: s for s, i in added.items()}

    def get_vocab(self, with_added_tokens: bool = True) -> dict[str, int]:
        """Token string -> id of every token (HF's ``get_vocab``); ``with_added_tokens=False``: the
        vocabulary's tokens alone, without special and added tokens."""
        _, added, by_string, _ = self._hf_names
        return by_string | added if with_added_tokens else dict(by_string)

    def get_vocab_size(self, with_added_tokens: bool = True) -> int:
        """``vocab_size``, the id range (HF's name; HF counts entries, see the module's doc); with
        ``with_added_tokens=False`` the number of vocabulary tokens, as HF gives it."""
        return self.vocab_size if with_added_tokens else len(self._hf_names[2])

    def __len__(self) -> int:
        """``vocab_size``: the id range, what an embedding needs (HF's ``len(tokenizer)`` counts entries)."""
        return self.vocab_size

    def token_to_id(self, token: str) -> int | None:
        """The id of the token spelled ``token`` (a special or added token's text first, as HF looks them
        up), or None."""
        if not isinstance(token, str):
            raise ConfigError(f"token is a {type(token).__name__}; pass a token's string as get_vocab() spells it "
                              "(for bytes, the tiktoken name: encode_single_token)")
        _, added, by_string, _ = self._hf_names
        i = added.get(token)
        return by_string.get(token) if i is None else i

    def convert_tokens_to_ids(self, tokens: str | list[str]) -> int | None | list[int | None]:
        """transformers' name: ``token_to_id`` of one token or of each of a list, a string no token spells giving
        the unknown token's id where the tokenizer has one (a SentencePiece model's ``<unk>``), else None."""
        if isinstance(tokens, str):
            i = self.token_to_id(tokens)
            return self._unk_id() if i is None else i
        if not isinstance(tokens, (list, tuple)):
            raise ConfigError(f"tokens is a {type(tokens).__name__}; pass a token's string or a list of them")
        return [self.convert_tokens_to_ids(t) if isinstance(t, str) else self.token_to_id(t) for t in tokens]

    def convert_ids_to_tokens(self, ids, skip_special_tokens: bool = False):
        """transformers' name: ``id_to_token`` of one id or of each of a list (None for an id no token holds);
        ``skip_special_tokens=True`` leaves the special tokens' ids out of a list."""
        if isinstance(ids, numbers.Integral) or not hasattr(ids, "__iter__"):  # (one id; a float is named)
            return self.id_to_token(ids)
        special = set(self.special_tokens.values()) if skip_special_tokens else ()
        return [self.id_to_token(i) for i in ids if i not in special]  # (a list, an array, a tensor's ids)

    def _unk_id(self) -> int | None:
        """The unknown token's id (what ``convert_tokens_to_ids`` gives a string no token spells), or None."""
        return None

    def id_to_token(self, token_id: int) -> str | None:
        """The string of token ``token_id`` as ``get_vocab`` spells it, or None for an id no token holds."""
        i = check_token_id(token_id)
        model, _, _, added_by_id = self._hf_names
        s = added_by_id.get(i)
        return model.get(i) if s is None else s
