"""The embedding model in two halves: prepared once, run lean.

- ``prepare``: the only code that imports torch and sentence-transformers, and only for a model
  that is not a BERT body with safetensors weights. The offline model and BERT folders are built
  without torch (``bert_source`` reads them, ``bert_graph`` writes the ONNX body and checks it
  against a numpy body); other models are loaded and exported by sentence-transformers (the
  ``torch`` extra). Either way it writes what the runtime needs into the model cache.
- ``runtime``: an ``Encoder`` over onnxruntime, ``tokenizers`` and numpy; what every user of
  vectors (engine, CLI, doctor) runs.
- ``cache``: where a prepared model lives, its manifest, and whether it is still good
  (standard library only).
"""
