"""The vector index: one raw unit vector per memory, kept in step with the store.

- ``files``: the on-disk format (header, generations of array files, backups, the write lock);
  reads and writes one generation, knows nothing of memories or encoders.
- ``sync``: ``VectorIndex``, the loaded index of one data directory, and how it follows the store
  (encode new or changed texts, drop removed ids, merge a concurrent writer's rows, rebuild).
- ``legacy``: the original plugin's ``embeddings.jsonl``, imported once.

The index never owns a memory: the store does. Scoring prompts against the vectors is recall's
job (``memself.recall``).
"""
