"""Recall: which memories a prompt brings into the context, per group.

- ``gate``: the original's per-group rule over ranked scores (pure).
- ``lines``: the numbers the gate uses: each group's line for the model in effect and where it
  comes from (the user's, the original's, the shipped calibration's or the default).
- ``scoring``: ``Recaller``, which scores a prompt against memory vectors (and their appliesWhen
  views) in the model's recall space (``memself.recall.background``) plus a lexical signal
  (``memself.recall.lexical``) minus a general-question penalty, then gates each group;
  ``ScoringSettings``, the model's calibrated scoring knobs.
- ``calibration``: a model's calibrated numbers, read from its file under ``memself/data/recall/``.
- ``calibrate``: the procedure that produces them from labelled case sets, and leave-one-set-out.
- ``pool``: the memories prepared for repeated scoring (matrix rows, view rows, groups, active
  mask, lexical postings).
- ``result``: what one recall returns, and its form on the engine's wire.
- ``memory_side``: which side of the encoder memories are encoded on (what the vector index
  stores and recall compares against).

Nothing here rewards or writes: the caller passes the hit ids to ``MemoryStore.reward_recall``.
"""
