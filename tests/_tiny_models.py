"""Tiny random BERT and T5 checkpoints, built offline in a second or two.

They are saved with ``save_pretrained`` (safetensors) and loaded back by path, exactly as
a user's ``--model /path/to/dir`` is, so the tests exercise the real loading code.
Import the fixtures into a test module: ``from _tiny_models import tiny_bert_dir``.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

_WORDS = (
    "the a an function method class returns adds sums two numbers list sort sorted string parse "
    "file open read write value key dict index search query code python go java def return self "
    "import for in if else while print range len append split join true false none error raise"
).split()
_CODE = [
    "def add(a, b): return a + b",
    "for i in range(10): print(i)",
    "class Stack:\n    def push(self, x): self.items.append(x)",
    "if key in table: return table[key]",
    "with open(path) as f: return f.read().split()",
]


def corpus(n: int = 300, seed: int = 0) -> list[str]:
    """Sentences and code snippets to train the tiny tokenizers on (and to encode)."""
    rng = random.Random(seed)
    sentences = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 24))) for _ in range(n)]
    return sentences + _CODE


def build_tiny_bert(directory: Path, *, seed: int = 0) -> Path:
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(corpus(), trainers.WordPieceTrainer(vocab_size=300, special_tokens=specials))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]", model_max_length=512,
    )
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=512, pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    # saved with its MLM head, like real BERT checkpoints; AutoModel drops the head on load
    BertForMaskedLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def build_tiny_t5(directory: Path, *, seed: int = 0) -> Path:
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

    specials = ["<pad>", "</s>", "<unk>"]  # ids 0, 1, 2 as in T5
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(corpus(), trainers.WordLevelTrainer(special_tokens=specials))
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", tok.token_to_id("</s>"))]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>", model_max_length=512
    )
    config = T5Config(
        vocab_size=len(tokenizer), d_model=32, d_kv=16, d_ff=64, num_layers=2, num_decoder_layers=2,
        num_heads=2, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
    )
    torch.manual_seed(seed)
    T5ForConditionalGeneration(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def tiny_t5_dir(tmp_path_factory) -> Path:
    return build_tiny_t5(tmp_path_factory.mktemp("tiny-t5"))


_SENTINEL_CODE = [
    "def sum_two_numbers(a, b): return a + b",
    "def read_input_file(path): return open(path).read()",
    "x_max = max(x_values) * 2 - min(y_values) / 3",
]


def build_tiny_t5_tokenizer(directory: Path, *, extra_ids: int = 100) -> Path:
    """A T5-style tokenizer (sentencepiece-like unigram, ``</s>`` appended) with sentinels.

    ``<extra_id_0>`` .. ``<extra_id_{extra_ids-1}>`` are special tokens at the end of the
    vocabulary, ``<extra_id_0>`` last, as in T5's own vocabulary (span-corruption code
    that counts sentinels down from the vocabulary size relies on that order).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "</s>", "<unk>"]  # ids 0, 1, 2 as in T5
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    tok.decoder = decoders.Metaspace(prepend_scheme="first")
    tok.train_from_iterator(
        corpus() + _SENTINEL_CODE,
        trainers.UnigramTrainer(vocab_size=400, special_tokens=specials, unk_token="<unk>"),
    )
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", tok.token_to_id("</s>"))]
    )
    sentinels = [f"<extra_id_{i}>" for i in reversed(range(extra_ids))]
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
        additional_special_tokens=sentinels, model_max_length=512,
    )
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_t5_sentinel_tokenizer_dir(tmp_path_factory) -> Path:
    return build_tiny_t5_tokenizer(tmp_path_factory.mktemp("tiny-t5-tokenizer"))


@pytest.fixture(scope="module", autouse=True)  # import it into a test module to apply it there
def one_torch_thread():
    # the tiny models are all per-op overhead; with two threads every op also waits for
    # the second core, which on a busy machine turns seconds into a minute
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
