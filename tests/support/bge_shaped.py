"""A random-weight BERT with bge-base-zh's tokenizer family, built offline, as a
sentence-transformers folder: proof that preparation and the runtime are not tied to e5.

bge-base-zh-v1.5 is a BERT (12 layers, 768 hidden, 12 heads, 3072 FFN, 512 positions) with a
21128-piece WordPiece vocabulary (bert-base-chinese's: lower-casing, CJK characters split apart,
``##`` continuation pieces) and CLS pooling in its sentence-transformers config. The vocabulary
here is built locally: the special tokens, ASCII characters and their ``##`` forms, common
English words and subwords, then CJK characters up to 21128 pieces. Tests use a tiny body
(``TINY``); ``bench/bench_lean.py`` builds the full ``BASE`` shape to measure start and memory.
"""

from __future__ import annotations

import string
from pathlib import Path

VOCAB_SIZE = 21128
# ``init``: the weights' standard deviation. The tiny body's is wide so that different texts get
# clearly different vectors (at BERT's 0.02 a random 2-layer CLS vector is nearly the same for
# every text, and a check against sentence-transformers would prove little); the base body keeps
# BERT's 0.02, as trained weights are about that size (at 0.5, twelve random layers amplify float
# rounding until the two runtimes disagree).
TINY = {"layers": 2, "hidden": 32, "heads": 2, "ffn": 64, "init": 0.5}
BASE = {"layers": 12, "hidden": 768, "heads": 12, "ffn": 3072, "init": 0.02}
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
_WORDS = (
    "the and for you that with this are not use code test file run commit build deploy "
    "config error return function class import value data user model memory rule project "
    "python go java rust git npm api http json yaml docker server client cache index query "
    "ing ed er ly tion ment able s es"
).split()


def wordpiece_vocab(size: int = VOCAB_SIZE) -> list[str]:
    pieces = list(SPECIALS)
    printable = [c for c in string.printable if not c.isspace()]
    pieces += printable
    pieces += ["##" + c for c in string.ascii_lowercase + string.digits]
    for word in _WORDS:
        for piece in (word, "##" + word):
            if piece not in pieces:
                pieces.append(piece)
    pieces += [chr(c) for c in range(0x3001, 0x3011)] + [chr(c) for c in range(0xFF01, 0xFF5F)]
    cp = 0x4E00
    while len(pieces) < size:
        pieces.append(chr(cp))
        cp += 1
    return pieces[:size]


def build(out: Path, shape: dict[str, float] = TINY, pooling: str = "cls", seed: int = 7) -> Path:
    """Write the sentence-transformers folder into ``out`` (created) and return it."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, BertTokenizerFast
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    out.mkdir(parents=True, exist_ok=True)
    raw = out / "raw"
    raw.mkdir(exist_ok=True)
    vocab = wordpiece_vocab()
    (raw / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tok = Tokenizer(
        models.WordPiece({p: i for i, p in enumerate(vocab)}, unk_token="[UNK]", max_input_chars_per_word=100)
    )
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    cls, sep = vocab.index("[CLS]"), vocab.index("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    tok.decoder = decoders.WordPiece(prefix="##")
    fast = BertTokenizerFast(
        tokenizer_object=tok,
        vocab_file=str(raw / "vocab.txt"),
        do_lower_case=True,
        tokenize_chinese_chars=True,
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
        model_max_length=512,
    )
    fast.save_pretrained(str(raw))
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=int(shape["hidden"]),
        num_hidden_layers=int(shape["layers"]),
        num_attention_heads=int(shape["heads"]),
        intermediate_size=int(shape["ffn"]),
        max_position_embeddings=512,
        type_vocab_size=2,
        pad_token_id=0,
        initializer_range=shape["init"],
    )
    BertModel(config, add_pooling_layer=False).save_pretrained(str(raw))
    transformer = Transformer(str(raw), max_seq_length=512, model_kwargs={"add_pooling_layer": False})
    dim = int(shape["hidden"])
    st = SentenceTransformer(
        modules=[transformer, Pooling(dim, pooling_mode=pooling), Normalize()], device="cpu"
    )
    folder = out / "st"
    st.save(str(folder))
    return folder
