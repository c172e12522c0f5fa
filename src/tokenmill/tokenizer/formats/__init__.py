"""Tokenizer files, read into and written from a :class:`~tokenmill.tokenizer.spec.TokenizerSpec`.

* ``tokenmill``: tokenmill's own versioned JSON file (``Tokenizer.save``/``load``);
* ``tiktoken``: ``.tiktoken`` rank files and the pair table their ranks define;
* ``tekken``: Mistral's ``tekken.json``;
* ``huggingface``: ``tokenizer.json`` import (byte-level BPE); ``export``: tokenizer.json, tiktoken
  rank files and ``tiktoken.Encoding`` out;
* ``schemas``: the schema every file passes before use; ``conversion_cache``: parsed files kept on
  disk by their SHA-256.
"""
