"""The embedding model in two halves: prepared once, run lean.

- ``prepare``: the only code that imports torch and sentence-transformers. It loads a model as
  sentence-transformers does (download, a local folder, or the expanded offline model), exports
  what the runtime needs into the model cache and checks the export against sentence-transformers.
- ``runtime``: an ``Encoder`` over onnxruntime, ``tokenizers`` and numpy; what every user of
  vectors (engine, CLI, doctor) runs.
- ``cache``: where a prepared model lives, its manifest, and whether it is still good
  (standard library only).
"""
