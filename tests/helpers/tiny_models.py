"""Tiny transformer models built offline (random weights, a character vocabulary): a sentence-transformers model
and a folder a test can name wherever a model name is taken."""
from __future__ import annotations

import string
from pathlib import Path

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *string.ascii_lowercase, *string.digits,
         *(f"##{c}" for c in string.ascii_lowercase + string.digits), *string.punctuation]


def tiny_bert(folder: Path, seed: int = 0, hidden: int = 32, head=None) -> Path:
    """A one-layer BERT and its tokenizer saved to ``folder`` (``head``: a transformers model class to save
    instead of the bare encoder, e.g. ``BertForSequenceClassification``)."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=hidden, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=2 * hidden, max_position_embeddings=512, num_labels=1)
    torch.manual_seed(seed)
    (head or BertModel)(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_sentence_transformer(folder: Path, seed: int = 0) -> Path:
    """A sentence-transformers model (the tiny BERT, mean pooling) saved to ``folder``."""
    from sentence_transformers import SentenceTransformer, models

    encoder = tiny_bert(folder.with_name(folder.name + "-bert"), seed)
    transformer = models.Transformer(str(encoder), max_seq_length=256)
    pooling = models.Pooling(transformer.get_embedding_dimension(), "mean")
    SentenceTransformer(modules=[transformer, pooling], device="cpu").save(str(folder))
    return folder
