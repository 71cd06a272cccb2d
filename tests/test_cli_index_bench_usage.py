"""The usage errors of 'structret index' and 'structret bench', pinned message by message.

Each command picks one job by its arguments (index: a SOURCE folder, --embeddings, --data, or an
--add/--remove update; bench: --system tables, --recipe/--suite tables, a --suite built from
folders under --data-root), and each job checks its own flags. These cases fix which message a
command line gets, including when it breaks several rules at once, so a reorganisation of the
checks keeps every documented command line's behaviour. None of them reads data or loads a model.
"""

from __future__ import annotations

import shlex

import pytest
from click.testing import CliRunner

from structret.cli import cli

NEEDS_LEXICAL = '--fusion and --tune choose how a lexical side fuses; add --lexical bm25'
TUNE_MEASURE = '--tune-measure says what --tune chooses by; give --tune SPLIT too'
SOURCE_ALONE = 'SOURCE indexes a folder of code; --embeddings, --data, --add, --remove and --tune do not go with it'
NO_TEXTS = "--lexical builds a hybrid index from --data (an update keeps the index's own lexical side); --embeddings carry no texts to index"
UPDATE_ALONE = '--add/--remove update the index in --out; build a new one with --embeddings or --data instead, not both'
ONE_SOURCE = 'give exactly one of --embeddings DIR (repeatable) or --data FORMAT:PATH (or --add/--remove to update the index in --out)'
SYSTEM_FLAGS = '--fusion and --tune go with --system tables (hybrid systems such as bm25+minilm)'
JSON_FLAG = '--json is for --system tables; with --recipe/--suite use --out DIR (results.json)'
SUITE_ROWS = '--suite names its own rows; leave out --recipe, --finetune and --zero-shot'
TUNE_NEEDS_DATA = '--tune needs --data with a validation split; the default data (the mined standard library) is all test data'
BAD_FUSION = "Invalid value for --fusion: unknown fusion method 'cosine'; use one of: zscore, minmax, rrf."
ROOT_NEEDS_SUITE = "--data-root goes with --suite NAME, a suite built from folders of data ('structret plugins --kind suite' lists the suites), e.g. --suite coir"

# (command line, exit code, the error's message or its start)
INDEX_CASES = [
    ('--data D --fusion zscore:0.3 --out OUT', 2, NEEDS_LEXICAL),
    ('--data D --tune valid --out OUT', 2, NEEDS_LEXICAL),
    ('--embeddings EMB --fusion zscore:0.3 --out OUT', 2, NEEDS_LEXICAL),
    ('--add D --tune valid --out OUT', 2, NEEDS_LEXICAL),
    ('--data D --fusion zscore:0.3 --tune-measure MRR@10 --out OUT', 2, NEEDS_LEXICAL),
    ('--data D --lexical bm25 --fusion zscore:0.3 --tune valid --out OUT', 2, 'give --fusion or --tune, not both'),
    ('SRC --fusion zscore:0.3 --tune valid --out OUT', 2, 'give --fusion or --tune, not both'),
    ('--data D --tune-measure MRR@10 --out OUT', 2, TUNE_MEASURE),
    ('SRC --tune-measure MRR@10 --out OUT', 2, TUNE_MEASURE),
    ('SRC --data D --out OUT', 2, SOURCE_ALONE),
    ('SRC --embeddings EMB --out OUT', 2, SOURCE_ALONE),
    ('SRC --add D --out OUT', 2, SOURCE_ALONE),
    ('SRC --remove some-id --out OUT', 2, SOURCE_ALONE),
    ('SRC --tune valid --out OUT', 2, SOURCE_ALONE),
    ('--embeddings EMB --lexical bm25 --out OUT', 2, NO_TEXTS),
    ('--add D --lexical bm25 --out OUT', 2, NO_TEXTS),
    ('--remove some-id --lexical bm25 --out OUT', 2, NO_TEXTS),
    ('--add D --data D --lexical bm25 --out OUT', 2, NO_TEXTS),
    ('--embeddings EMB --data D --lexical bm25 --out OUT', 2, NO_TEXTS),
    ('--data D --split valid --lexical bm25 --tune valid --out OUT', 2, '--tune valid would choose the fusion on the documents being indexed; tune on another split'),
    ('--split valid --lexical bm25 --tune valid --out OUT', 2, '--tune valid would choose the fusion on the documents being indexed; tune on another split'),
    ('--add D --data D --out OUT', 2, UPDATE_ALONE),
    ('--remove some-id --embeddings EMB --out OUT', 2, UPDATE_ALONE),
    ('--out OUT', 2, ONE_SOURCE),
    ('--no-verify --out OUT', 2, ONE_SOURCE),
    ('--lexical bm25 --out OUT', 2, ONE_SOURCE),
    ('--embeddings EMB --data D --out OUT', 2, ONE_SOURCE),
    ('--data D --no-verify --out OUT', 2, '--no-verify skips the checks of --embeddings folders; with --data there are none'),
    ('--data D --lexical bm25 --fusion cosine:0.2 --out OUT', 2, BAD_FUSION),
    ('SRC --fusion cosine:0.2 --out OUT', 2, BAD_FUSION),
    ('--embeddings EMB --data D --no-verify --out OUT', 2, ONE_SOURCE),
    ('--embeddings EMB --index nosuch --out OUT', 1, "unknown index 'nosuch'"),
    ('--data D --index nosuch --out OUT', 1, "unknown index 'nosuch'"),
    ('SRC --index nosuch --out OUT', 1, "unknown index 'nosuch'"),
    ('--add D --out OUT', 1, "--add/--remove update an existing index, and {OUT} is not a folder; build one first with 'structret index --data FORMAT:PATH --index usearch --out {OUT}'."),
    ('--data D --lexical bm25 --fusion cosine:0.2 --index nosuch --out OUT', 1, "unknown index 'nosuch'"),
    ('SRC --fusion cosine:0.2 --index nosuch --out OUT', 1, "unknown index 'nosuch'"),
    ('--remove @EMB/missing.txt --out EMB', 1, '--remove @{EMB}/missing.txt: cannot read {EMB}/missing.txt (No such file or directory).'),
]

# (command line, exit code, the error's message or its start)
BENCH_CASES = [
    ('--tune-measure MRR@10', 2, TUNE_MEASURE),
    ('--suite santa --tune-measure MRR@10', 2, TUNE_MEASURE),
    ('--suite santa --fusion zscore:0.3', 2, SYSTEM_FLAGS),
    ('--recipe minilm-code --tune valid', 2, SYSTEM_FLAGS),
    ('--data-root SRC --fusion zscore:0.3', 2, SYSTEM_FLAGS),
    ('--suite coir --fusion zscore:0.3', 2, SYSTEM_FLAGS),
    ('--data-root SRC', 2, ROOT_NEEDS_SUITE),
    ('--data-root SRC --recipe minilm-code', 2, ROOT_NEEDS_SUITE),
    ('--suite santa --data-root SRC', 2, "--data-root goes with a suite built from folders of data; 'santa' is not one ('structret plugins --kind suite' lists them): leave out --data-root"),
    ('--suite coir', 2, '--suite coir is built from folders of data ('),
    ('--suite coir --recipe minilm-code', 2, '--suite coir is built from folders of data ('),
    ('--suite coir --data-root SRC --recipe minilm-code --json x.json', 2, '--suite coir --data-root takes --system, --split, --limit, --batch-size, --out; leave out --recipe, --json'),
    ('--suite coir --data-root SRC --data D --data-option limit=5 --finetune x --zero-shot --set max_steps=1 --backbone minilm --row A --seeds 2', 2, '--suite coir --data-root takes --system, --split, --limit, --batch-size, --out; leave out --data, --data-option, --finetune, --zero-shot, --set, --backbone, --row, --seeds'),
    ('--recipe minilm-code --json x.json', 2, JSON_FLAG),
    ('--suite santa --json x.json', 2, JSON_FLAG),
    ('--suite santa --recipe minilm-code --json x.json', 2, JSON_FLAG),
    ('--suite santa --recipe minilm-code', 2, SUITE_ROWS),
    ('--suite santa --finetune minilm-code', 2, SUITE_ROWS),
    ('--suite santa --zero-shot', 2, SUITE_ROWS),
    ('--recipe minilm-code --split test', 2, "--recipe trains on each dataset's train split and scores its test split; leave out --split"),
    ('--finetune minilm-code', 2, '--finetune goes with --recipe or --suite'),
    ('--zero-shot', 2, '--zero-shot goes with --recipe or --suite'),
    ('--set max_steps=1', 2, '--set goes with --recipe or --suite'),
    ('--backbone minilm', 2, '--backbone goes with --recipe or --suite'),
    ('--row A', 2, '--row goes with --recipe or --suite'),
    ('--out OUT', 2, '--out goes with --recipe or --suite'),
    ('--seeds 2', 2, '--seeds goes with --recipe or --suite'),
    ('--zero-shot --data D --data D', 2, '--zero-shot goes with --recipe or --suite'),
    ('--data D --data D', 2, '--system tables score one --data; give several with --recipe'),
    ('--tune valid', 2, TUNE_NEEDS_DATA),
    ('--system bm25+minilm --tune valid', 2, TUNE_NEEDS_DATA),
    ('--data D --tune test', 2, '--tune test would choose the fusion on the split that is scored; tune on another split (e.g. --tune valid)'),
    ('--data D --split valid --tune valid', 2, '--tune valid would choose the fusion on the split that is scored; tune on another split (e.g. --tune valid)'),
    ('--data D --fusion cosine:0.2', 2, BAD_FUSION),
    ('--data D --fusion cosine:0.2 --tune test', 2, BAD_FUSION),
    ('--system nosuch', 1, "unknown system 'nosuch'"),
    ('--data D --system nosuch --fusion cosine:0.2', 1, "unknown system 'nosuch'"),
    ('--system nosuch --tune valid', 1, "unknown system 'nosuch'"),
    ('--suite santa --recipe minilm-code --data-option bad', 1, "option 'bad' is not KEY=VALUE"),
    ('--recipe minilm-code --split test --set bad', 1, "--set: option 'bad' is not KEY=VALUE"),
    ('--suite santa --json x.json --set bad', 2, JSON_FLAG),
    ('--suite coir --data-root SRC --system nosuch', 1, "unknown system 'nosuch'"),
]



def _invoke(tmp_path, command, line):
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "emb").mkdir(exist_ok=True)
    where = {"SRC": tmp_path / "src", "EMB": tmp_path / "emb", "OUT": tmp_path / "out"}
    args = [str(where.get(a, a)) if a != "D" else "codesearchnet:nowhere.jsonl.gz"
            for a in shlex.split(line.replace("@EMB/", f"@{tmp_path / 'emb'}/"))]
    return CliRunner().invoke(cli, [command, *args]), where


def _check(result, where, code, message):
    message = message.format(**{k: str(v) for k, v in where.items()})
    errors = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    assert result.exit_code == code, result.output
    assert errors and errors[-1].startswith(f"Error: {message}"), result.output
    if code == 2:  # a usage error is the whole message: no prefix or suffix changed
        assert errors[-1] == f"Error: {message}" or message.endswith("("), result.output
    assert not (where["OUT"]).exists()


@pytest.mark.parametrize(("line", "code", "message"), INDEX_CASES, ids=[c[0] for c in INDEX_CASES])
def test_index_usage_errors(tmp_path, line, code, message):
    _check(*_invoke(tmp_path, "index", line), code, message)


@pytest.mark.parametrize(("line", "code", "message"), BENCH_CASES, ids=[c[0] for c in BENCH_CASES])
def test_bench_usage_errors(tmp_path, line, code, message, monkeypatch):
    monkeypatch.chdir(tmp_path)  # bench's --json and --out write relative to it
    _check(*_invoke(tmp_path, "bench", line), code, message)
