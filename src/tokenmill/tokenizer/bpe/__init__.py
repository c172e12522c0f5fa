"""Byte-pair encoding: training merges and encoding with them.

* ``train``: ``train_bpe`` (chunk counting, then ``merges.learn_merges_arrays``), with
  ``_count_kernels`` and ``_train_kernels``;
* ``tables``: the vocabulary, pair table and merge ids of a model, built and checked;
* ``reference``: encoding one chunk by merge rank in plain Python, and ``PythonEncoder`` (the twin every
  kernel is tested against);
* ``encoder``: ``CompiledEncoder`` over ``_encode_kernels`` (vocabulary tables, chunk cache, threads).
"""
