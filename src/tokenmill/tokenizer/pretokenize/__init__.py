"""Pre-tokenization: cutting text into the chunks BPE merges within.

* ``patterns``: the split regexes (presets gpt2, gpt4/cl100k, o200k) and the ``regex`` reference;
* ``presets``: the compiled kernels of the three presets (``split_offsets``, ``split_text``) and the
  Unicode class table they read;
* ``splitter``: the one entry point over every compiled splitter (``compiled_offsets``): the presets,
  the Llama 3 / Qwen family (``_family_kernels``), and any other pattern of the tokenizer-regex family
  through ``regex_compile`` (pattern -> DFA and VM program) and ``_regex_vm``;
* ``_pretok_kernels``, ``_family_kernels``, ``_regex_vm``: the numba kernels, private to this package.
"""
