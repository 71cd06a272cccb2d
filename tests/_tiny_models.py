"""Tiny random BERT and T5 checkpoints, built offline in a second or two (the builders live in
structret.testing, which plugin authors use too).

They are saved with ``save_pretrained`` (safetensors) and loaded back by path, exactly as
a user's ``--model /path/to/dir`` is, so the tests exercise the real loading code.
Import the fixtures into a test module: ``from _tiny_models import tiny_bert_dir``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from structret.testing import CODE as _CODE  # noqa: F401  (tests import these names from here)
from structret.testing import WORDS as _WORDS
from structret.testing import build_tiny_bert, build_tiny_t5, corpus  # noqa: F401


# (name, argument, docstring, body) of distinct functions: under a tiny random model a
# document's own code ranks it first (test_api, test_serve, test_browser, test_export)
FUNCTIONS = [
    ("read_config", "path", "Read a configuration file and return its settings.",
     "with open(path) as f:\n        return dict(line.split('=', 1) for line in f)"),
    ("parse_date", "text", "Parse an ISO date string into a tuple of integers.",
     "return tuple(int(x) for x in text.split('-'))"),
    ("send_mail", "server", "Send an email message through an SMTP server.", "server.sendmail()\n    server.quit()"),
    ("sort_numbers", "items", "Sort a list of numbers in ascending order.", "return sorted(items)"),
    ("count_words", "text", "Count how often each word occurs in a text.",
     "counts = {}\n    for w in text.split():\n        counts[w] = counts.get(w, 0) + 1\n    return counts"),
    ("join_paths", "parts", "Join path parts with the separator of the system.", "return '/'.join(parts)"),
]

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


def build_lively_bert(tiny_bert_dir: Path, out: Path, *, masked_lm: bool = False) -> Path:
    """The tiny BERT with larger random weights: at BERT's own init (std 0.02) every text gets
    nearly the same vector (pairwise cosine > 0.999), so a cosine check against it proves nothing.
    ``masked_lm``: with its MLM head, as mep trains it."""
    import shutil

    import torch
    from transformers import AutoModel, AutoModelForMaskedLM

    net = (AutoModelForMaskedLM if masked_lm else AutoModel).from_pretrained(tiny_bert_dir)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in net.named_parameters():
            # shared by every text (positions, token types) stays small, so the words tell texts apart
            scale = 0.02 if "position" in name or "token_type" in name else 1.0 if "word" in name else 0.3
            if "LayerNorm" not in name:
                p.copy_(torch.randn(p.shape, generator=generator) * scale)
    net.save_pretrained(out)
    for file in tiny_bert_dir.iterdir():
        if file.name.startswith(("tokenizer", "special_tokens", "vocab")):
            shutil.copy(file, out / file.name)
    return out
