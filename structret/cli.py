"""The ``structret`` command line: parse, call ``structret.api``, print.

Over 400 lines because every command's options and its --help, with examples, are declared
here; the work each command does lives in ``structret.api``, so a script can do all of it.
This module imports nothing else of structret but ``structret.errors`` (an architecture test
checks it).

Start-up imports only click and ``structret.api`` (which loads no numpy): torch,
transformers, tree-sitter and friends are imported inside the calls that need them.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import traceback
import warnings
from typing import Any

import click

from structret import api
from structret.api import KINDS, PluginWarning, defaults
from structret.errors import StructretError


def _show_plugin_warning(message, category, filename, lineno, file=None, line=None):
    # plugin and recipe warnings are sentences for the user, not a developer's source location
    if issubclass(category, PluginWarning) or category.__name__ == "RecipeWarning":
        click.echo(f"warning: {message}", err=True)
    else:
        _default_showwarning(message, category, filename, lineno, file, line)


_default_showwarning = warnings.showwarning


DEBUG_ENV = "STRUCTRET_DEBUG"


class _Group(click.Group):
    """Core's commands and those plugins add (``register_commands``); every error as one message, not a
    traceback: structret's own as they are, any other naming the plugin whose code raised it (the
    traceback with --debug or STRUCTRET_DEBUG=1)."""

    def list_commands(self, ctx):
        return sorted([*super().list_commands(ctx), *api.command_names(taken=list(self.commands))])

    def get_command(self, ctx, name):
        # core's commands first: running one of them never loads a plugin's command module
        return super().get_command(ctx, name) or api.load_command(name)

    def invoke(self, ctx):
        try:
            with api.checked_once():  # the pre-flight and the work open the same runs: each is checked once
                return super().invoke(ctx)
        except StructretError as exc:
            click.echo(f"Error: {exc}", err=True)
            ctx.exit(1)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except BrokenPipeError:  # `structret plugins | head`: the reader has all it wants; not an error
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush fails quietly
            ctx.exit(0)
        except Exception as exc:  # noqa: BLE001 - the one boundary between the user and any code's bug
            if ctx.params.get("debug") or os.environ.get(DEBUG_ENV, "").strip() in ("1", "true", "yes"):
                raise
            click.echo(f"Error: {unexpected(exc)}", err=True)
            ctx.exit(1)


def unexpected(exc: BaseException) -> str:
    """One line for an exception no check anticipated: whose code raised it, what, and how to see more."""
    where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    at = f" at {where.filename}:{where.lineno}" if where else ""
    found = api.plugin_of_error(exc)
    said = f"{type(exc).__name__}: {exc}".strip()
    more = f"Run again with --debug (or {DEBUG_ENV}=1) for the traceback"
    if found is not None:
        plugin, dist = found
        return (f"plugin '{plugin}' from distribution '{dist}' failed: {said}{at}. This is a bug in that plugin "
                f"or the way it was used; {more}, and report it to the plugin's authors.")
    return f"unexpected {said}{at}. {more}; if it is structret's bug, please report it with that output."


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="structret")
@click.option("--debug", is_flag=True, help=f"Show the traceback of an unexpected error (or set {DEBUG_ENV}=1).")
def cli(debug):
    """Structure-aware dense retrieval, assembled from named plugins.

    \b
    Quick start (offline; what it does: 'structret bench --help'; timings: docs/performance.md):
      structret bench                       # BM25 vs zero-shot MiniLM on the mined stdlib
      structret plugins                     # everything that can be named in a pipeline
    """
    warnings.showwarning = _show_plugin_warning


# progress bars redraw with "\r" ten times a second: right on a terminal, hundreds of lines in a
# redirected log, where one update per bar every 30 s (and its last) says enough
LOG_PROGRESS_SECONDS = "30"


def main():
    if not sys.stderr.isatty():
        os.environ.setdefault("TQDM_MININTERVAL", LOG_PROGRESS_SECONDS)
    cli(prog_name="structret")


# --- plugins -------------------------------------------------------------------------


@cli.command()
@click.option("--kind", type=click.Choice(sorted(KINDS)), help="Only plugins of this kind.")
@click.option("--options", "options_of", metavar="NAME",
              help="Print one plugin's options: type, default and what each does (how to set them below).")
def plugins(kind, options_of):
    """List every plugin: name, kind, distribution and help; or one plugin's options.

    \b
    Examples:
      structret plugins --kind backbone
      structret plugins --options mep
      structret train --recipe santa-code --set mep.extractor=tree-sitter ...   # set one
    """
    if options_of:
        click.echo(api.describe_plugin(options_of, kind))
        return
    entries = api.list_plugins(kind)
    rows = [("kind", "name", "distribution", "help")]
    for e in entries:
        name = e.name + (f" ({', '.join(e.aliases)})" if e.aliases else "")
        rows.append((e.kind, name, e.distribution, e.help))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + "  " + r[3])
    for b in api.broken_plugins():
        click.echo(f"not loaded: plugin '{b.plugin}' from '{b.distribution}': {b.error}", err=True)


# --- mine ----------------------------------------------------------------------------


@cli.command()
@click.argument("src", type=click.Path(exists=True, file_okay=False))
@click.option("--language", "-l", required=True, help="A registered miner: python, go, java, javascript, php, ruby.")
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False), help="Output .jsonl.gz (CodeSearchNet rows).")
@click.option("--repo", help="Value of the 'repo' field (default: the folder name).")
@click.option("--exclude", multiple=True, metavar="DIRNAME",
              help="Folder name to skip, repeatable (always skipped: __pycache__, site-packages, node_modules, vendor).")
@click.option("--workers", "-j", default=1, show_default=True, type=click.IntRange(min=1),
              help="Processes mining in parallel; the output is the same bytes for any number.")
@click.option("--chunk-files", default=64, show_default=True, type=click.IntRange(min=1),
              help="Files per shard: the unit of work of a worker, and what an interrupted run redoes at most.")
@click.option("--structure-pairs", is_flag=True,
              help="Also keep functions without a docstring, with a query from their structure: the comment "
                   "opening the body, else the name's words and parameters (the row's pair_kind says which).")
@click.option("--splits", metavar="TRAIN/VALID/TEST",
              help="Draw train/valid/test partitions, as percentages (e.g. 80/10/10). A file's functions go "
                   "to one split, chosen by a hash of its path, so a re-run puts them in the same split. "
                   "Default: no split; every row is read when a command's --split is left out.")
def mine(src, language, out, repo, exclude, workers, chunk_files, structure_pairs, splits):
    """Turn a source tree into a CodeSearchNet-format corpus.

    Applies CodeSearchNet's rules (query = first docstring paragraph; drops short
    queries, short functions, dunder methods and constructors, names with 'test',
    duplicate code). With --splits, also draws train/valid/test by file path; without,
    every row is for searching (and for --split-less training and bench).

    Long runs resume: shards of --chunk-files files are written to OUT.shards/ as
    they finish; run the same command again after an interruption and only the
    unfinished shards are mined. OUT is written (and OUT.shards/ removed) at the end.

    \b
    Example:
      structret mine /usr/lib/python3.11 --language python --splits 80/10/10 --out stdlib.jsonl.gz
      structret bench --data codesearchnet:stdlib.jsonl.gz --split test
      structret mine ~/src/big-tree --language java --workers 8 --out big.jsonl.gz   # Ctrl-C, re-run: resumes
      structret mine ~/src/project --language go --structure-pairs --splits 90/10/0 --out train.jsonl.gz   # + undocumented code
    """
    api.check_names(miner=language)  # unknown language: error before walking the tree
    try:
        splits = api.parse_splits(splits)
    except StructretError as exc:
        raise click.BadParameter(str(exc), param_hint="--splits") from None
    report = api.mine(src, language, out, repo=repo, exclude=tuple(api.DEFAULT_EXCLUDE) + exclude, workers=workers,
                      chunk_files=chunk_files, structure_pairs=structure_pairs, splits=splits)
    click.echo(report.summary())


# --- extract -------------------------------------------------------------------------


@cli.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--extractor", "-e", required=True, help="A registered extractor (structret plugins --kind extractor).")
@click.option("--language", "-l", help="Programming language (default: from the file suffix).")
@click.option("--title", help="Product title, for the noun extractors (nltk-nouns, spacy-nouns, title-overlap).")
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE",
              help="Extractor option, repeatable (e.g. node_types=identifier,constant).")
def extract(path, extractor, language, title, options):
    """Print the entities an extractor finds in a file: what masked entity prediction masks.

    \b
    Examples:
      structret extract --extractor python-tokenize mymodule.py
      structret extract --extractor tree-sitter --language go server.go
      structret extract --extractor title-overlap --title "Naturtint Hair Color 5N" description.txt
    """
    result = api.extract_file(path, extractor, language, title=title, **api.parse_options(options))
    click.echo(result.format())


@cli.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--linearizer", "-z", default=defaults.LINEARIZER, show_default=True,
              help="A registered linearizer (structret plugins --kind linearizer).")
@click.option("--language", "-l", help="Programming language (default: from the file suffix).")
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE",
              help="Linearizer option, repeatable (split_identifiers=true, max_tokens=512, parser=tree-sitter).")
def linearize(path, linearizer, language, options):
    """Print a file's code as a structure sequence (and each token's parent), as in Khan & Jang.

    \b
    Examples:
      structret linearize --linearizer dfs sum.py
      structret linearize --linearizer dfs-parent --language go server.go
      structret linearize --linearizer raw --option split_identifiers=true sum.py
    """
    result = api.linearize_file(path, linearizer, language, **api.parse_options(options))
    click.echo(result.format())


# --- encode / index / search ---------------------------------------------------------

_data_options = [
    click.option("--data", "-d", required=True, help="FORMAT:PATH, e.g. codesearchnet:python_test_0.jsonl.gz"),
    click.option("--split", help="Split to read (default: the reader's: every row for codesearchnet; test for beir, adv, cosqa, esci, ma-amazon)."),
    click.option("--data-option", "data_options", multiple=True, metavar="KEY=VALUE",
                 help="Reader option, repeatable (e.g. locale=us)."),
]
_backbone_options = [
    click.option("--backbone", "-b", default=defaults.BACKBONE, show_default=True, help="A registered backbone."),
    click.option("--model", help="Hub id or local path overriding the backbone's default weights: a run of "
                                 "'structret train', or a folder of 'structret export --format onnx' (then "
                                 "onnxruntime encodes, without torch)."),
    click.option("--batch-size", default=32, show_default=True),
    click.option("--backbone-option", "backbone_options", multiple=True, metavar="KEY=VALUE",
                 help="Backbone option, repeatable: dtype=fp32|bf16 (default auto: bf16 only where it measured "
                      "faster on this machine), compile=true (torch.compile, for large corpora), max_length=512, ..."),
]


def _fusion_options(which: str, after_tuning: str, default: str = "zscore:0.3") -> list:
    """--fusion, --tune and --tune-measure: how a hybrid fuses, or the split and measure that choose it."""
    return [
        click.option("--fusion", metavar="METHOD:WEIGHT",
                     help=f"{which}: how the sides fuse, zscore, minmax or rrf, and the lexical side's weight in "
                          f"[0, 1] (default: {default}; ',depth=N' candidates per side, ',k=N' for rrf). "
                          "Example: --fusion minmax:0.3"),
        click.option("--tune", "tune_split", metavar="SPLIT",
                     help=f"{which}: choose the fusion on this split of --data, every method x weight, by the first "
                          f"measure {after_tuning}. Example: --data codesearchnet:go.jsonl.gz --tune valid"),
        click.option("--tune-measure", metavar="MEASURE",
                     help="With --tune: choose by this measure (default: the first; ties go to the next). "
                          "Example: --tune valid --tune-measure nDCG@50"),
    ]


def _no_verify(command):
    """--no-verify for a command that loads artifacts through the library (runs named by --model or
    --system, indexes, embedding folders): each is used unchecked, and says so on stderr."""
    @click.option("--no-verify", is_flag=True,
                  help="Use runs, indexes and embeddings even if their files do not match their checksums.json "
                       "(or it is missing); a warning on stderr names each one not checked. Results may be wrong.")
    @functools.wraps(command)
    def run(*args, no_verify, **kwargs):
        with api.unverified(no_verify):
            return command(*args, **kwargs)

    return run


def _apply(options):
    def decorate(f):
        for option in reversed(options):
            f = option(f)
        return f
    return decorate


def _preflight(*, data=(), data_options=(), backbone_options=(), index_options=(), chunker_options=(), **names):
    """Every plugin name and option a command was given checked before any data is read
    (structret.api.check_names); the options as KEY=VALUE strings."""
    api.check_names(data=data, data_options=api.parse_options(data_options),
                    backbone_options=api.parse_options(backbone_options),
                    index_options=api.parse_options(index_options),
                    chunker_options=api.parse_options(chunker_options), **names)


def _read(data, split, data_options, *, need=("documents",)):
    """The dataset, its read summary on stderr; an error if a part the command ``need``s is empty."""
    dataset = api.load_dataset(data, split, need=need, **api.parse_options(data_options))
    click.echo(dataset.stats.summary(), err=True)
    return dataset


def _fusion(spec):
    """--fusion as a structret.search.fusion.Fusion (None when not given), or a usage error."""
    if not spec:
        return None
    try:
        return api.parse_fusion(spec)
    except StructretError as exc:
        raise click.BadParameter(str(exc), param_hint="--fusion") from None


def _model(backbone, model, options=()):
    """The model to encode with (structret.api): ``backbone``, or the run ``--model`` names."""
    return api.open_model(backbone, model, api.parse_options(options))


@cli.command()
@_apply(_data_options + _backbone_options)
@click.option("--what", type=click.Choice(["documents", "queries"]), default="documents", show_default=True)
@click.option("--out", "-o", required=True, type=click.Path(file_okay=False), help="Output folder.")
@click.option("--shard", metavar="I/N",
              help="Encode only slice I of N (0-based) into OUT/shard-I-of-N; run N of them, anywhere, then "
                   "'structret index --embeddings OUT'. Default under accelerate launch/torchrun: RANK/WORLD_SIZE.")
@click.option("--chunk-rows", default=10_000, show_default=True, type=click.IntRange(min=1),
              help="Rows encoded and saved at a time; a re-run of an interrupted command skips finished chunks.")
@_no_verify
def encode(data, split, data_options, backbone, model, batch_size, backbone_options, what, out, shard,
           chunk_rows):
    """Encode a dataset's documents (or queries) to vectors.

    Writes embeddings.npy (float32), ids.json and structret.json into OUT (with
    --shard I/N: into OUT/shard-I-of-N). Vectors are saved every --chunk-rows rows
    while encoding, so running the same command again after an interruption resumes;
    a finished output with the same inputs is left as it is.

    \b
    Examples:
      structret encode --data codesearchnet:stdlib.jsonl.gz --split test --out runs/emb
      structret index --embeddings runs/emb --index hnsw --out runs/idx
      structret encode --data codesearchnet:big.jsonl.gz --out runs/emb --backbone-option compile=true
    \b
      # four shards, e.g. on four machines sharing runs/ (or copied into one folder)
      structret encode --data codesearchnet:big.jsonl.gz --out runs/emb --shard 0/4   # ... 1/4, 2/4, 3/4
      structret index --embeddings runs/emb --index hnsw --out runs/idx
    \b
      # one shard per process: RANK of WORLD_SIZE
      accelerate launch --num_processes 2 $(which structret) encode --data codesearchnet:big.jsonl.gz --out runs/emb
    """
    chosen = api.encoding_shard(shard)
    _preflight(data=[data], data_options=data_options, backbone=backbone, model=model,
               backbone_options=backbone_options)
    if chosen is not None and not shard:
        click.echo(f"encoding shard {chosen} (RANK/WORLD_SIZE of the launcher)", err=True)
    dataset = _read(data, split, data_options, need=(what,))
    result = api.encode_dataset(_model(backbone, model, backbone_options), dataset, out, what=what, shard=chosen,
                            chunk_rows=chunk_rows, batch_size=batch_size, data=data, split=split)
    click.echo(result.summary())


@cli.command()
@click.argument("source", required=False, type=click.Path(exists=True, file_okay=False))
@click.option("--embeddings", multiple=True, type=click.Path(exists=True, file_okay=False),
              help="Folder written by 'structret encode' (with --shard: the folder holding its shard-I-of-N "
                   "folders); repeatable, to combine shards kept in several places.")
@click.option("--data", "-d", help="FORMAT:PATH to encode and index in one go (instead of --embeddings).")
@click.option("--split", help="Split to read (default: as --data's reader reads it: every row for codesearchnet).")
@click.option("--data-option", "data_options", multiple=True, metavar="KEY=VALUE")
@_apply(_backbone_options)
@click.option("--index", "index_name", default=defaults.INDEX, show_default=True,
              help=f"A registered index (flat, hnsw, ...), or {defaults.AUTO}: {defaults.EXACT_INDEX} below "
                   f"{defaults.ANN_FROM:,} vectors, {defaults.ANN_INDEX} (M=16, ef=300) from there, as measured.")
@click.option("--index-option", "index_options", multiple=True, metavar="KEY=VALUE",
              help="Index option, repeatable (hnsw: M=32, ef_construction=400, ef=200).")
@click.option("--metric", default="ip", show_default=True, type=click.Choice(["ip", "cosine"]))
@click.option("--out", "-o", required=True, type=click.Path(file_okay=False), help="Output folder.")
@click.option("--no-verify", is_flag=True,
              help="With --embeddings: index them even if their files do not match their checksums.json (or it "
                   "is missing); a warning on stderr names each folder not checked. The index may be wrong.")
@click.option("--add", "add", metavar="FILE",
              help="Update the index in --out: add the documents of FILE, a 'structret encode' output folder "
                   "(encoded by the index's model) or a FORMAT:PATH dataset the index's model encodes now.")
@click.option("--remove", "remove", multiple=True, metavar="ID",
              help="Update the index in --out: remove the document ID, repeatable; @FILE reads ids from FILE, one "
                   "a line. Removed before --add adds, so removing and adding an id replaces it. Needs an index "
                   "that can remove (flat, hnsw, usearch, milvus).")
@click.option("--lexical", metavar="RETRIEVER",
              help="Also index the texts with this lexical retriever (bm25) and fuse it with the vectors in every "
                   "search (hybrid retrieval; the index keeps it beside the vectors). Example: --lexical bm25")
@_apply(_fusion_options("With --lexical", "(recorded in the index)",
                        "the fusion a trained run's recipe ships with (minilm-catalog), else zscore:0.3"))
@click.option("--ranking", metavar="RULE=STRENGTH,...",
              help="With SOURCE: the ranking rules every search applies after fusion (structret.search.ranking), "
                   "instead of the defaults chosen on validation; 'none' switches them off. Example: --ranking "
                   "definition=2,stem=1,penalty=0.3,saturation=0.5,coherence=1")
@click.option("--chunker", default=defaults.CHUNKER, show_default=True,
              help="With SOURCE: how files are cut into units, a registered chunker ('structret plugins --kind "
                   "chunker').")
@click.option("--chunker-option", "chunker_options", multiple=True, metavar="KEY=VALUE",
              help="With SOURCE: an option of the chunker, repeatable ('structret plugins --options syntax'). Example: "
                   "--chunker-option max_chars=1000")
def index(source, embeddings, data, split, data_options, backbone, model, batch_size, backbone_options, index_name,
          index_options, metric, out, no_verify, add, remove, lexical, fusion, tune_split, tune_measure, ranking,
          chunker, chunker_options):
    """Build a vector index from a source folder, a dataset or encoded embeddings, or update one.

    With SOURCE, a folder of code: every file of the 19 languages the chunker reads, and text
    files, cut into units that hold every line (each definition, and the code between them),
    indexed with BM25 per field fused with the vectors (--lexical to choose another lexical side;
    --backbone none for BM25 alone), ranked by the project's structure; the index records the
    folder. Run the same command again after the code changed: only units whose text changed are
    encoded again, and it prints how many are new or edited, gone and unchanged. .gitignore and
    .structretignore are respected; a binary, non-UTF-8, minified or oversized file is skipped
    and named.

    From shards ('structret encode --shard I/N'), every shard of the corpus must be
    there, encoded with the same model and text format; the error names the missing ones.

    With --add or --remove, the index already in --out is updated: the new index is
    written beside it and swapped in with one rename, so an interrupted update leaves the
    previous index whole. An id to remove that the index does not hold is an error, and
    nothing changes. Two updates of one index at once take turns (a lock beside it).

    \b
    With --lexical bm25 the index is hybrid: BM25 over the same texts, kept (and
    checksummed) in OUT/lexical, fused with the vectors in every search by --fusion, or by the
    fusion that scores best on --tune SPLIT. Updates refit the lexical side. With --backbone none
    it holds the lexical side alone: no vectors, and searching it loads no model.

    \b
    Examples:
      structret index ~/src/project --out runs/project        # a source folder; again later: only changes
      structret index --data codesearchnet:stdlib.jsonl.gz --split test --index hnsw --out runs/idx
      structret search runs/idx "read a config file" -k 5
      structret index --data codesearchnet:stdlib.jsonl.gz --split test --lexical bm25 --tune valid --out runs/hybrid
      structret index --data codesearchnet:stdlib.jsonl.gz --backbone none --lexical bm25 --out runs/bm25   # no vectors
      structret index --embeddings runs/emb --index hnsw --out runs/idx            # all shards in runs/emb
      structret index --embeddings a/emb --embeddings b/emb --out runs/idx          # shards from two machines
    \b
      # updates (an index built with --index usearch or flat)
      structret index --out runs/idx --add codesearchnet:new.jsonl.gz           # encoded by the index's model
      structret index --out runs/idx --add runs/new-emb --remove old-id-1 --remove @gone.txt
    """
    _check_index_fusion(fusion, tune_split, tune_measure, hybrid=bool(lexical) or source is not None)
    encoding = dict(backbone=backbone, model=model, backbone_options=backbone_options, batch_size=batch_size)
    kind = dict(index_name=index_name, index_options=index_options, metric=metric)
    if source is not None:  # a folder of code: api.index_source
        _index_source(source, out, lexical=lexical, fusion=fusion, chunker=chunker, chunker_options=chunker_options,
                      ranking=ranking, **encoding, **kind,
                      others={"--embeddings": embeddings, "--data": data is not None, "--add": add is not None,
                              "--remove": remove, "--tune": tune_split})
    elif chunker != defaults.CHUNKER or chunker_options or ranking:
        raise click.UsageError("--chunker, --chunker-option and --ranking go with SOURCE, a folder of code")
    elif add is not None or remove:  # an update of the index in --out: api.update_index
        _index_update(out, add, remove, split=split, batch_size=batch_size, verify=not no_verify,
                      embeddings=embeddings, data=data, lexical=lexical)
    elif embeddings:  # folders of 'structret encode': api.index_embeddings
        _index_embeddings(embeddings, out, verify=not no_verify, data=data, lexical=lexical, **kind)
    else:  # --data, encoded now: api.build_index (and api.tune_fusion with --tune)
        _index_data(data, out, split=split, data_options=data_options, no_verify=no_verify, lexical=lexical,
                    fusion=fusion, tune_split=tune_split, tune_measure=tune_measure, **encoding, **kind)


_ONE_SOURCE = ("give exactly one of --embeddings DIR (repeatable) or --data FORMAT:PATH "
               "(or --add/--remove to update the index in --out)")
_NO_TEXTS = ("--lexical builds a hybrid index from --data (an update keeps the index's own lexical side); "
             "--embeddings carry no texts to index")


def _check_index_fusion(fusion, tune_split, tune_measure, *, hybrid) -> None:
    """``index``'s --fusion, --tune and --tune-measure, whatever the job: they need a lexical side (a SOURCE
    folder's index is hybrid already), and --fusion and --tune exclude each other."""
    if (fusion or tune_split) and not hybrid:
        raise click.UsageError("--fusion and --tune choose how a lexical side fuses; add --lexical bm25")
    if fusion and tune_split:
        raise click.UsageError("give --fusion or --tune, not both")
    _check_tune_measure(tune_split, tune_measure)


def _check_tune_measure(tune_split, tune_measure) -> None:
    """--tune-measure without --tune (index and bench)."""
    if tune_measure and not tune_split:
        raise click.UsageError("--tune-measure says what --tune chooses by; give --tune SPLIT too")


def _index_source(source, out, *, lexical, fusion, chunker, chunker_options, ranking, backbone, model,
                  backbone_options, batch_size, index_name, index_options, metric, others) -> None:
    """``structret index SOURCE``: a folder's files cut into units, encoded where they changed and indexed
    hybrid (with --backbone none: a lexical index)."""
    if any(others.values()):
        raise click.UsageError("SOURCE indexes a folder of code; --embeddings, --data, --add, --remove and "
                               "--tune do not go with it")
    _preflight(chunker=chunker, chunker_options=chunker_options)
    cut = api.parse_options(chunker_options)
    if backbone == LEXICAL_ONLY:
        if model or fusion or backbone_options:
            raise click.UsageError("--backbone none indexes no vectors; --model, --fusion and --backbone-option "
                                   "go with a model")
        choice = None
    else:
        _preflight(backbone=backbone, model=model, backbone_options=backbone_options, index=index_name,
                   index_options=index_options)
        # opened only if something must be encoded: an unchanged folder is answered without torch
        choice = api.ModelChoice(backbone, model, api.parse_options(backbone_options))
    options: dict[str, Any] = api.parse_options(index_options)  # the index plugin's, checked by _preflight
    done = api.index_source(source, out, model=choice, kind=index_name, metric=metric,
                            lexical=lexical or defaults.SOURCE_LEXICAL, fusion=_fusion(fusion), batch_size=batch_size,
                            chunker=chunker, chunker_options=cut,
                            ranking=None if ranking is None else "" if ranking == "none" else ranking, **options)
    click.echo(f"{done.summary()}; the index is in {out}")


def _index_update(out, add, remove, *, split, batch_size, verify, embeddings, data, lexical) -> None:
    """``structret index --add/--remove``: the ids to remove (``@FILE``: one a line), then update_index."""
    if lexical:
        raise click.UsageError(_NO_TEXTS)
    if embeddings or data is not None:
        raise click.UsageError("--add/--remove update the index in --out; build a new one with --embeddings or "
                               "--data instead, not both")
    if not os.path.isdir(out):
        raise StructretError(f"--add/--remove update an existing index, and {out} is not a folder; build one first "
                             f"with 'structret index --data FORMAT:PATH --index usearch --out {out}'.")
    ids = []
    for given in remove:
        if not given.startswith("@"):
            ids.append(given)
            continue
        try:
            with open(given[1:], encoding="utf-8") as f:
                ids += [line.rstrip("\r\n") for line in f if line.strip()]
        except OSError as exc:
            raise StructretError(f"--remove {given}: cannot read {given[1:]} ({exc.strerror}).") from None
    done = api.update_index(out, add=add, remove=ids, split=split, batch_size=batch_size, verify=verify)
    click.echo(f"updated {out}: added {done.added}, removed {done.removed}; it holds {done.count} vectors")


def _index_embeddings(embeddings, out, *, verify, data, lexical, index_name, index_options, metric) -> None:
    """``structret index --embeddings DIR``: the vectors of 'structret encode' (all its shards) indexed."""
    if lexical:
        raise click.UsageError(_NO_TEXTS)
    if data is not None:
        raise click.UsageError(_ONE_SOURCE)
    _preflight(index=index_name, index_options=index_options)
    count, parts = api.index_embeddings(embeddings, out, kind=index_name, metric=metric, verify=verify,
                                        **api.parse_options(index_options))
    shards = f" from {parts} shards" if parts > 1 else ""
    click.echo(f"indexed {count} vectors{shards} ({index_name}, {metric}) in {out}")


def _index_data(data, out, *, split, data_options, no_verify, lexical, fusion, tune_split, tune_measure, backbone,
                model, backbone_options, batch_size, index_name, index_options, metric) -> None:
    """``structret index --data FORMAT:PATH``: a dataset's documents encoded and indexed (with --lexical, hybrid;
    with --tune, fused as another split of the data scores best)."""
    if tune_split and tune_split == split:
        raise click.UsageError(f"--tune {tune_split} would choose the fusion on the documents being indexed; tune on "
                               f"another split")
    if data is None:
        raise click.UsageError(_ONE_SOURCE)
    if no_verify:
        raise click.UsageError("--no-verify skips the checks of --embeddings folders; with --data there are none")
    if backbone == LEXICAL_ONLY:
        _index_lexical(data, out, split=split, data_options=data_options, lexical=lexical,
                       others={"--model": model, "--fusion": fusion, "--tune": tune_split,
                               "--backbone-option": backbone_options})
        return
    _preflight(data=[data], data_options=data_options, backbone=backbone, model=model,
               backbone_options=backbone_options, index=index_name, index_options=index_options, retriever=lexical)
    fusion_spec = _fusion(fusion)
    # an empty index would answer every search with nothing, and exit 0
    dataset = _read(data, split, data_options, need=("documents",))
    encoder = _model(backbone, model, backbone_options)
    if tune_split:
        tuned = api.tune_fusion(encoder, _read(data, tune_split, data_options, need=("documents", "queries")),
                                split=tune_split, lexical=lexical, batch_size=batch_size, measure=tune_measure)
        fusion_spec = tuned["fusion"]
        click.echo(f"fusion {fusion_spec} scored best on the {tune_split} split ({tuned['measure']} "
                   f"{100 * tuned['scores'][fusion_spec]:.2f} over {tuned['queries']} queries)", err=True)
    options: dict[str, Any] = api.parse_options(index_options)  # the index plugin's, checked by _preflight
    built = api.build_index(encoder, dataset, kind=index_name, metric=metric, batch_size=batch_size, lexical=lexical,
                            fusion=fusion_spec, **options)
    if tune_split:
        built.meta["lexical"]["tuning"] = tuned
    built.save(out)
    hybrid = f", hybrid with {lexical}, fusion {built.fusion.spec}" if lexical else ""
    click.echo(f"indexed {len(built)} vectors ({index_name}, {metric}{hybrid}) in {out}")


LEXICAL_ONLY = "none"  # --backbone none: a lexical index, no vectors


def _index_lexical(data, out, *, split, data_options, lexical, others) -> None:
    """``structret index --data FORMAT:PATH --backbone none --lexical R``: the documents indexed by the lexical
    retriever alone; searching it loads no model (api.build_index with no model)."""
    if not lexical:
        raise click.UsageError("--backbone none indexes no vectors; name the lexical side: --lexical bm25")
    for flag, given in others.items():
        if given:
            raise click.UsageError(f"{flag} goes with a model; --backbone none indexes no vectors")
    _preflight(data=[data], data_options=data_options, retriever=lexical)
    built = api.build_index(None, _read(data, split, data_options, need=("documents",)), lexical=lexical)
    built.save(out)
    click.echo(f"indexed {len(built)} documents ({lexical}, no vectors) in {out}")


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
def verify(paths):
    """Check every file of the artifacts at PATHS (indexes, runs, embedding folders) against their
    checksums.json, hashing every byte.

    Loading an artifact hashes it once, then trusts a stamp of each file's size, inode and
    times while none of them changes; this command ignores the stamps (and renews them), for
    when a file may have changed without its times moving (a disk error, a restored backup).

    \b
    Example:
      structret verify runs/idx runs/sda-mep
    """
    for path in paths:
        for folder, files, size in api.verify_tree(path):
            click.echo(f"ok  {folder}  ({files} files, {size / 1e6:,.1f} MB)")


@cli.command()
@click.argument("index_dir", type=click.Path(exists=True, file_okay=False))
@click.argument("queries", nargs=-1, required=True)
@click.option("-k", default=10, show_default=True, help="How many results per query.")
@click.option("--lines", default=8, show_default=True,
              help="Lines of each result to show, those holding a word of the query first (0: none).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the hits as JSON (a list, one entry per query) for scripts: rank, score, id, path, "
                   "start and end line, the sides that found it, the snippet's lines and the whole text.")
@click.option("--no-verify", is_flag=True,
              help="Search even if the index's files (or its model's) do not match their checksums.json, or it is "
                   "missing; a warning on stderr names what was not checked. The results may be wrong.")
@click.option("--explain", is_flag=True,
              help="Under each hit, what the index's ranking rules did to it (a definition of the symbol asked for, "
                   "its path matching the query, a test path's penalty, its file's other hits).")
def search(index_dir, queries, k, lines, as_json, no_verify, explain):
    """Search an index built by 'structret index' and show the top-k hits.

    A function from a source folder shows as PATH:START-END (relative to the folder), then
    its lines that hold a word of the query, the most words first (identifier parts count:
    readConfig matches "read config"; marked on a terminal), then its first lines.

    The index, its texts and a trained model it was built with are checked against their
    checksums.json first: a missing, damaged or unlisted file is an error that names it.

    \b
    Examples:
      structret search runs/idx "read a config file" "parse a date" -k 5
      structret search runs/project "read a config file" --json | jq '.[0].hits[0].location'
      structret search runs/project Depends --explain     # why each hit ranks where it does
    """
    found = api.load_index(index_dir, verify=not no_verify, texts=lines > 0 or as_json)
    lexical_only = found.index is None  # 'structret index --backbone none': searched without a model
    if not lexical_only and not found.meta.get("backbone"):
        raise StructretError(f"{index_dir} records no backbone, so queries cannot be encoded; build it with 'structret index'.")
    model = None if lexical_only else found.model  # loaded (and checked) before any query is encoded
    if found.texts_note:
        click.echo(f"warning: {found.texts_note}", err=True)
    root = (found.meta.get("source") or {}).get("path")
    results = [{"query": query, "hits": [api.readable(hit, query, rank=rank, root=root, lines=lines)
                                         for rank, hit in enumerate(hits, 1)]}
               for query, hits in zip(queries, found.search(model, list(queries), k) if model is not None
                                      else found.search(list(queries), k=k))]
    if as_json:
        click.echo(json.dumps(results, indent=1))
        return
    for result in results:
        click.secho(f"query: {result['query']}", bold=True)
        terms = api.query_terms(result["query"])
        for hit in result["hits"]:
            sides = f"  [{' + '.join(hit['sources'])}]" if hit["sources"] else ""
            click.echo(f"{hit['rank']:>3}. {hit['score']:.4f}  {click.style(hit['location'], fg='cyan')}{sides}")
            if explain:
                click.echo("       " + ("; ".join(hit["why"]) or "no rule moved it"))
            width = len(str(max((row["line"] or 0 for row in hit["snippet"]), default=0)))
            for row in hit["snippet"]:  # styles are dropped when the output is not a terminal
                text = api.mark_terms(row["text"], terms, lambda w: click.style(w, fg="yellow", bold=True))
                click.echo(f"     {row['line'] or '':>{width}}  {text}")


@cli.command()
@click.argument("index_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--model", "model", metavar="RUN_OR_NAME",
              help="The model to encode queries with (default: the one the index records). It must be the model "
                   "that built the index.")
@click.option("--model-option", "model_options", multiple=True, metavar="KEY=VALUE",
              help="Option of the model's backbone, repeatable: runtime=onnx-int8 encodes queries through "
                   "onnxruntime int8 (exported once, checked against torch), dtype=fp32, ...; variant=int8 for a "
                   "--model folder of 'structret export --format onnx'.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; 0.0.0.0 serves the network (with a warning: there is no authentication).")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.option("--extractor", "-e", metavar="NAME",
              help="The entities to mark in hits: a registered extractor, or none. Default: the one the model's "
                   "run learned entities with (its structret.json records it per language); for other models "
                   "python-tokenize when the texts are Python, else none.")
@click.option("--extractor-option", "extractor_options", multiple=True, metavar="KEY=VALUE",
              help="Option of --extractor, repeatable (e.g. node_types=identifier).")
@click.option("--language", "-l",
              help="The indexed code's language (go, java, ...), for the tree-sitter extractor and highlighting.")
@click.option("--no-verify", is_flag=True,
              help="Serve even if the index's files (or its model's) do not match their checksums.json; a warning "
                   "names what was not checked.")
def serve(index_dir, model, model_options, host, port, extractor, extractor_options, language, no_verify):
    """Serve a search page and a JSON API over an index, its model loaded once.

    GET / is the page (a query box; ranked hits with scores, highlighted code, entities
    marked, the query's time); GET /api/search?q=...&k=10 gives the hits as JSON and
    GET /api/health the index and model. It listens on 127.0.0.1 only, unless --host says
    otherwise.

    \b
    Example:
      structret serve runs/idx                          # then open http://127.0.0.1:8000/
      structret serve runs/idx --model runs/sda-mep --port 8080
      structret serve runs/idx --model-option runtime=onnx-int8    # int8 queries through onnxruntime
      curl 'http://127.0.0.1:8000/api/search?q=read+a+config+file&k=5'
    """
    api.serve(index_dir, model, host=host, port=port, extractor=extractor,
              extractor_options=api.parse_options(extractor_options), language=language, verify=not no_verify,
              model_options=api.parse_options(model_options),
               echo=lambda line: click.echo(line, err=True))


@cli.command()
@click.argument("index_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--no-verify", is_flag=True,
              help="Serve even if the index's files (or its model's) do not match their checksums.json; a warning "
                   "names what was not checked.")
def mcp(index_dir, no_verify):
    """Serve a project's index to a coding agent over MCP (stdio).

    Two tools: search(query, k=10, path=None) returns the project's functions best first, each
    as path:start-end with its lines that hold a word of the query (path: only hits in that
    file or folder, or matching a glob such as *.go); refresh() indexes the recorded folder again,
    encoding only what changed. The index and its model are loaded once, at start. Needs the
    MCP SDK: pip install 'structret[mcp]'.

    \b
    Example (then register the command with the agent, e.g. in its MCP servers config):
      structret index ~/src/project --out runs/project
      structret mcp runs/project
    """
    api.run_mcp(index_dir, verify=not no_verify)


@cli.command()
@click.argument("run")
@click.option("--format", "fmt", required=True, type=click.Choice(["sentence-transformers", "onnx"]),
              help="sentence-transformers: a folder SentenceTransformer(path) loads, with a model card. "
                   "onnx: model.onnx (fp32) and model_int8.onnx (dynamic int8) with the tokenizer, for "
                   "onnxruntime without torch.")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="A new (or empty) directory.")
@click.option("--no-verify", is_flag=True,
              help="Export even if the run's files do not match its checksums.json (a warning says so).")
def export(run, fmt, out, no_verify):
    """Export a run of 'structret train' for use outside structret.

    The exported vectors are checked against the run's own on sample texts (cosine at
    least 0.9999; 0.99 for int8) and the export fails if they differ; for onnx the speed
    of torch and of both graphs on this CPU is printed too. Runs whose vectors an export
    cannot reproduce (aspect slots, informed heads, a text format, a T5 backbone) are
    refused with the reason. Needs the export extra: pip install 'structret[export]'.

    \b
    Examples:
      structret export runs/sda --format sentence-transformers --out exported/sda-st
      structret export runs/sda --format onnx --out exported/sda-onnx
      structret serve runs/idx --model exported/sda-onnx     # queries encoded without torch
    """
    api.export_run(run, fmt, out, verify=not no_verify, echo=lambda line: click.echo(line, err=True))


@cli.command()
@_apply(_data_options + _backbone_options)
@click.option("--depth", default=100, show_default=True, help="Rank this many documents per query.")
@click.option("--keep", default=30, show_default=True, help="Negatives kept per query, sampled from the top --depth.")
@click.option("--seed", default=0, show_default=True)
@click.option("--filter", "filter_spec", metavar="margin:M|percent:P",
              help="Drop candidates likely to be false negatives before sampling (NV-Retriever's positive-aware "
                   "mining): margin:M drops those scoring above the positive's score - M, percent:P those above "
                   "P x the positive's score. Example: --filter percent:0.95")
@click.option("--judge", metavar="MODEL",
              help="Score the candidates for --filter with this model instead of the mining one: a backbone name, "
                   "a run directory or model folder (a teacher bi-encoder), or a sentence-transformers CrossEncoder "
                   "folder. Example: --judge runs/teacher")
@click.option("--lexical", metavar="RETRIEVER",
              help="Rank with this lexical retriever (bm25, bm25-fields) instead of the backbone: negatives the "
                   "lexical side ranks high, for a dense side trained to cover what it misses.")
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False),
              help="Tevatron-format .jsonl(.gz); the counts go beside it as NAME.report.json.")
@_no_verify
def negatives(data, split, data_options, backbone, model, batch_size, backbone_options, depth, keep, seed,
              filter_spec, judge, lexical, out):
    """Mine hard negatives from a model's own index (ANCE-style), for 'dr' fine-tuning.

    For every judged query: rank the corpus, drop the positives, sample --keep of the
    top --depth. Writes Tevatron training lines (query, positive_passages, negative_passages).

    --filter drops, before sampling, the candidates scoring too close to the query's
    positive (with several positives, its lowest-scoring one): likely relevant documents
    nobody judged. Scores are the mining model's dot products, or --judge's. How many
    were dropped (in all, per query, queries left with none) is printed and written to
    NAME.report.json beside --out. docs/results.md ("Filtered hard negatives") measures it.

    \b
    Examples:
      structret negatives --model runs/sda/final --data codesearchnet:stdlib.jsonl.gz --split train \\
          --depth 100 --out runs/sda/negatives.jsonl.gz
      structret negatives --backbone minilm --data codesearchnet:stdlib.jsonl.gz --split train \\
          --filter percent:0.95 --out negatives-p95.jsonl.gz
      structret negatives --backbone minilm --data codesearchnet:stdlib.jsonl.gz --split train \\
          --filter margin:0.05 --judge cross-encoder-dir --out negatives-ce.jsonl.gz
      structret negatives --lexical bm25-fields --data codesearchnet:stdlib.jsonl.gz --split train \\
          --depth 30 --keep 1 --filter percent:0.95 --judge minilm --out bm25-negatives.jsonl.gz
    """
    try:
        parsed = api.NegativeFilter.parse(filter_spec) if filter_spec else None
    except StructretError as e:
        raise click.BadParameter(str(e), param_hint="--filter") from e
    if judge and parsed is None:
        raise click.UsageError("--judge scores the candidates for --filter; give a filter too, "
                               "e.g. --filter percent:0.95 --judge " + judge)
    if lexical:
        _preflight(data=[data], data_options=data_options, systems=[lexical])
    else:
        _preflight(data=[data], data_options=data_options, backbone=backbone, model=model,
                   backbone_options=backbone_options)
    dataset = _read(data, split, data_options, need=("documents", "queries", "judgments"))
    encoder = None if lexical else _model(backbone, model, backbone_options).backbone
    report = api.mine_negatives(encoder, dataset, out, depth=depth, keep=keep, seed=seed,
                                batch_size=batch_size, filter=parsed, judge=judge, lexical=lexical)
    click.echo(report.summary())


@cli.command("filter-pairs")
@_apply([_data_options[0],
         click.option("--split", default="train", show_default=True,
                      help="Split whose pairs are judged; the kept rows carry it as their partition."),
         _data_options[2]])
@click.option("--teacher", default=defaults.BACKBONE, show_default=True,
              help="The model that judges each pair: a backbone name or a run directory of 'structret train'.")
@click.option("--top-k", "k", default=20, show_default=True, type=click.IntRange(min=1),
              help="Keep a pair if its query ranks its own code within this many of the pool.")
@click.option("--within", type=click.Choice(["language", "all"]), default="language", show_default=True,
              help="The pool a query ranks: the training functions of its own language, or all of them.")
@click.option("--min-score", type=float, default=None,
              help="Also require the teacher's score of the pair (MiniLM: its cosine) above this. CoRNStack's "
                   "rule: --top-k 2 --min-score 0.7")
@click.option("--batch-size", default=32, show_default=True)
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False),
              help="CodeSearchNet rows of the kept pairs (.jsonl.gz); the counts go beside it as NAME.report.json.")
@_no_verify
def filter_pairs(data, split, data_options, teacher, k, within, min_score, batch_size, out):
    """Keep only the training pairs whose query finds its own code (consistency filtering).

    A teacher (zero-shot MiniLM by default) ranks, for every (docstring, code) pair of
    --split, its training pool by the docstring; the pair is kept if its own code is in the
    top --top-k (and, with --min-score, the teacher scores the pair above it). Drops docstrings
    that do not describe their code (CodeRankEmbed / CoRNStack's filter). Writes the kept pairs as
    CodeSearchNet rows with partition = --split, and how
    many were kept and dropped per language (printed and in NAME.report.json). Teacher
    vectors are kept in STRUCTRET_CACHE/vectors, so a second k costs no encoding.

    \b
    Example:
      structret filter-pairs --data "codesearchnet:corpus/*.jsonl.gz" --split train --top-k 20 --out train-k20.jsonl.gz
      structret filter-pairs --data "codesearchnet:corpus/*.jsonl.gz" --top-k 2 --min-score 0.7 --out cornstack.jsonl.gz
      structret train --recipe minilm-code --data codesearchnet:train-k20.jsonl.gz --out runs/sda-k20
    """
    _preflight(data=[data], data_options=data_options, systems=[teacher])
    dataset = _read(data, split, data_options, need=("documents", "queries"))
    report = api.filter_pairs(teacher, dataset, out, split=split, k=k, within=within, batch_size=batch_size,
                              min_score=min_score)
    click.echo(report.summary())


@cli.command("new-model")
@_apply(_data_options)
@click.option("--backbone", "-b", default=defaults.FRESH_BACKBONE, show_default=True,
              help="A backbone that trains from scratch (its factory takes texts).")
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE",
              help="Backbone option, repeatable (linearizer=dfs, strict=true, vocab_size=8000, layers=3, ...).")
@click.option("--out", "-o", required=True, type=click.Path(file_okay=False), help="Model directory to write.")
def new_model(data, split, data_options, backbone, options, out):
    """Create a fresh model whose tokenizer is learned from a dataset's code and queries.

    For backbones trained from scratch (Khan & Jang's informed-transformer); train it
    next with 'structret train --model OUT'.

    \b
    Example:
      structret new-model --data codesearchnet:stdlib.jsonl.gz --split train --option linearizer=dfs --out init-dfs
      structret train --recipe khan-jang-dfs --model init-dfs --data codesearchnet:stdlib.jsonl.gz --out runs/kj-dfs
    """
    _preflight(data=[data], data_options=data_options, backbone=backbone, backbone_options=options)
    api.check_from_scratch(backbone)  # before the data is read
    dataset = _read(data, split, data_options)
    count = api.new_model(backbone, dataset, out, api.parse_options(options))
    click.echo(f"wrote a fresh {backbone} to {out} (tokenizer learned from {count} texts)")


# --- train ---------------------------------------------------------------------------


@cli.command()
@click.option("--recipe", "-r", help="A shipped preset (santa-code, santa-product, ...) or a .toml file.")
@click.option("--objective", help="Objectives joined by '+', optional weights: sda+mep, sda+0.5*mep.")
@click.option("--backbone", "-b", help="A registered backbone (default from the recipe, else minilm).")
@click.option("--model", help="Hub id or local path overriding the backbone's weights.")
@click.option("--backbone-option", "backbone_options", multiple=True, metavar="KEY=VALUE",
              help="Backbone factory option, repeatable (e.g. informed_layers=1); recipe field backbone_options.")
@click.option("--data", "-d", help="FORMAT:PATH of training pairs, or tevatron:PATH.")
@click.option("--split", help="Split to train on (default: train).")
@click.option("--data-option", "data_options", multiple=True, metavar="KEY=VALUE",
              help="Reader option, repeatable (e.g. categories=cats.jsonl); recipe field data_options.")
@click.option("--out", "-o", "output", help="Run directory: recipe.toml, metrics.jsonl, checkpoints, final/.")
@click.option("--set", "settings", multiple=True, metavar="FIELD=VALUE",
              help="Any other recipe field, repeatable: lr=2e-5, batch_size=16, max_steps=200, ...")
@click.option("--grad-cache-chunk", "grad_cache_chunk", type=click.IntRange(min=0), metavar="N",
              help="Gradient caching: encode N texts at a time, same gradients as the whole batch, memory of N "
                   "(0 = off); recipe field grad_cache_chunk.")
@click.option("--resume", is_flag=True, help="Continue the run in --out from its last checkpoint.")
@click.option("--no-verify", is_flag=True,
              help="Use the checkpoint (--resume) or run (--model RUN) even if its files do not match its "
                   "checksums.json, or it is missing; a warning on stderr names what was not checked.")
@click.option("--list-recipes", is_flag=True,
              help="List the installed recipes (every plugin's), each with what it does and the paper table it "
                   "reproduces, and exit.")
def train(recipe, objective, backbone, model, backbone_options, data, split, data_options, output, settings,
          grad_cache_chunk, resume, no_verify, list_recipes):
    """Continual pretraining or fine-tuning: any objectives on any backbone.

    One process on CPU; DDP when started with torchrun or accelerate launch
    (batch_size is the global batch). Checkpoints are written atomically; --resume
    restores data order, optimizer, scheduler and RNG state.

    \b
    Examples:
      structret train --objective sda+mep --backbone codet5-base --data codesearchnet:python/final/jsonl --out runs/santa
      structret train --recipe santa-code --data codesearchnet:stdlib.jsonl.gz --set max_steps=200 --out runs/santa
      structret train --out runs/santa --resume
      structret train --recipe khan-jang-minilm-informed --data codesearchnet:stdlib.jsonl.gz --out runs/informed
      torchrun --nproc_per_node 2 $(which structret) train --recipe santa-code --data ... --out runs/ddp
      structret train --recipe santa-code --data ... --grad-cache-chunk 16 --out runs/big-batch   # docs/scale.md
    """
    if list_recipes:
        presets = api.list_recipes()
        width = max(len(r.name) for r in presets)
        for r in presets:
            click.echo(f"{r.name.ljust(width)}  {r.description}")
            click.echo(f"{'':{width}}  reproduces: {r.reproduces or '(not stated)'}")
        return
    overrides = {"split": split, "grad_cache_chunk": grad_cache_chunk, **api.parse_settings(settings)}
    if backbone_options:  # whatever the run's backbone is
        overrides["backbone_options"] = api.parse_options(backbone_options)
    if data_options:
        overrides["data_options"] = api.parse_options(data_options)
    run = api.train(recipe, data=data, out=output, objective=objective, backbone=backbone, model=model,
                    resume=resume, verify=not no_verify, settings=overrides)
    click.echo(f"trained model: {run.final}")


# --- bench ---------------------------------------------------------------------------


@cli.command()
@click.option("--data", "-d", "data", multiple=True,
              help="FORMAT:PATH, repeatable with --recipe (one column group each); with --suite KEY=FORMAT:PATH "
                   "(e.g. --data code=adv:dataset). Default: the mined Python standard library / the suite's stand-ins.")
@click.option("--split", help="Split to evaluate with --system (default: test; for the mined stdlib: all of it).")
@click.option("--data-option", "data_options", multiple=True, metavar="KEY=VALUE",
              help="Reader option for every dataset, repeatable (e.g. --data-option limit=2000).")
@click.option("--system", "-s", "systems", multiple=True,
              help="A retriever, a backbone, a run directory of 'structret train', or LEXICAL+DENSE fused "
                   "(bm25+minilm, bm25+runs/sda); repeatable (default: bm25, minilm, bm25+minilm, bm25-fields+minilm). "
                   "Example: --system bm25 --system runs/sda --system bm25+runs/sda")
@click.option("--recipe", "-r", "recipes", multiple=True,
              help="Train this recipe (preset or .toml) on each --data's train split and add it as a row; repeatable. "
                   "Example: --recipe minilm-code --recipe santa-code --set max_steps=20")
@click.option("--finetune", metavar="RECIPE",
              help="Fine-tune each --recipe's run with this recipe (keeps its backbone, text format and their options). "
                   "Example: --recipe attempt --finetune attempt-finetune")
@click.option("--zero-shot", is_flag=True,
              help="Also score the untrained backbone, and each --recipe without --finetune. "
                   "Example: --recipe santa-code --finetune santa-code-finetune --zero-shot")
@click.option("--set", "settings", multiple=True, metavar="FIELD=VALUE",
              help="Recipe field for every trained row, repeatable; bounds CPU runs. "
                   "Example: --set max_steps=50 --set batch_size=16")
@click.option("--backbone", "-b",
              help="Train and score every row on this backbone (overrides recipes and stand-ins). "
                   "Example: --suite santa --data code=adv:dataset --backbone codet5-base")
@click.option("--suite", type=str, metavar="NAME",
              help="A paper's table: santa, khan-jang, attempt, or an ablation (santa-ablation, ...), or a suite "
                   ".toml: its rows and columns, the paper's numbers beside the measured ones; or coir (with "
                   "--data-root: every --system on every CoIR task folder). "
                   "Example: --suite khan-jang --set max_steps=20")
@click.option("--data-root", "data_root", type=click.Path(), metavar="PATH",
              help="With a --suite built from folders of data: the folder holding them, e.g. one CoIR task folder "
                   "per task (corpus.jsonl, queries.jsonl, qrels/test.tsv). "
                   "Example: --suite coir --data-root coir-data --system bm25 --system minilm")
@click.option("--row", "row_labels", multiple=True, metavar="LABEL",
              help="With --suite: run only these rows (repeatable). Example: --suite attempt --row ATTEMPT --row BIBERT")
@click.option("--seeds", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="With --recipe/--suite: train every trained row N times, with the recipe's seed + 0, 1, ..., N-1 "
                   "(seed 42 by default; --set seed=S moves the base), and print mean ± sample std per cell; "
                   "untrained rows are evaluated once. Example: --suite santa --seeds 3 (seeds 42, 43, 44)")
@click.option("--out", "-o", type=click.Path(file_okay=False),
              help="With --recipe/--suite: write results.json, results.md and results.png here (default: bench-out). "
                   "Example: --out bench-out/santa")
@click.option("--batch-size", default=32, show_default=True)
@click.option("--limit", type=int, help="Use only the first N queries/pairs (quick runs).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False),
              help="With --system: also write the numbers to this JSON file.")
@click.option("--no-vector-cache", "no_vector_cache", is_flag=True,
              help="With --system: encode every text again instead of reusing the vectors an earlier run of the "
                   "same model kept in STRUCTRET_CACHE/vectors. Example: structret bench --no-vector-cache")
@_apply(_fusion_options("For hybrid systems (bm25+minilm)", "(then --split is scored once with it)",
                        "the fusion a trained run's recipe ships with (bm25-fields+runs/x), else zscore:0.3"))
@_no_verify
def bench(data, split, data_options, systems, recipes, finetune, zero_shot, settings, backbone, suite, data_root,
          row_labels, seeds, out, batch_size, limit, json_out, no_vector_cache, fusion, tune_split, tune_measure):
    """Score retrieval systems on datasets and print one table.

    The options choose one of three jobs:

    --system, or neither option below: rows = systems, columns = one --data's measures. With no
    options: the installed Python standard library mined into CodeSearchNet rows, its docstrings as
    queries, scored with BM25, the bundled all-MiniLM-L6-v2 and both fused (bm25+minilm,
    bm25-fields+minilm). Mined rows and vectors are cached (STRUCTRET_CACHE, else ~/.cache/structret):
    a second run encodes only texts it has not seen. How long each run takes: docs/performance.md ("The cold main job").

    --recipe: each recipe trained on every --data's train split (then --finetune) and scored on its
    test split; --zero-shot adds the untrained rows.

    --suite NAME: a paper's table, the paper's numbers beside the measured ones (offline stand-ins for
    data not given). --suite coir --data-root PATH: every --system on every CoIR task folder.

    Each dataset is scored by its task's protocol ('structret plugins --kind protocol'; code search:
    MRR@100 and CodeSearchNet's 999-distractor MRR). Trained runs and evaluations are cached: a re-run
    recomputes only what changed.

    \b
    Examples:
      structret bench
      structret bench --data codesearchnet:python/final/jsonl/test --system bm25 --system minilm
      structret bench --data esci:esci-data/shopping_queries_dataset --split test --json esci.json
      structret bench --data codesearchnet:other.jsonl.gz --system minilm --system runs/sda
      structret bench --data codesearchnet:go --system minilm --system bm25+minilm --tune valid --json go.json
      structret bench --recipe minilm-code --recipe khan-jang-minilm-informed --set max_steps=20 --zero-shot
      structret bench --recipe minilm-code --zero-shot --set max_steps=20 --seeds 3   # seeds 42, 43, 44
      structret bench --suite santa --set max_steps=50 --out bench-out/santa
      structret bench --suite santa --data code=adv:dataset --backbone codet5-base   # the full reproduction
      structret bench --suite coir --data-root coir-data --system bm25 --system minilm --out bench-out/coir
    """
    _check_tune_measure(tune_split, tune_measure)
    training = dict(data_options=data_options, settings=settings, backbone=backbone, seeds=seeds,
                    batch_size=batch_size, limit=limit, json_out=json_out, fusion=fusion, tune_split=tune_split)
    if data_root or suite and api.suite_needs_root(suite):  # a suite of data folders: api.bench_folders
        _bench_folders(suite, data_root, systems, split, batch_size, limit, out, no_vector_cache,
                       fusion=fusion, tune_split=tune_split,
                       others={"--data": data, "--data-option": data_options, "--recipe": recipes,
                               "--finetune": finetune, "--zero-shot": zero_shot, "--set": settings,
                               "--backbone": backbone, "--row": row_labels, "--seeds": seeds > 1, "--json": json_out})
    elif suite:  # a paper's table: api.bench_suite
        _bench_suite(suite, data, row_labels, out, others={"--recipe": recipes, "--finetune": finetune,
                                                           "--zero-shot": zero_shot}, **training)
    elif recipes:  # recipes trained and scored: api.bench_recipes
        _bench_recipes(recipes, data, systems, out, split=split, finetune=finetune, zero_shot=zero_shot, **training)
    else:  # systems on one dataset: api.run_bench
        _bench_systems(systems, data, split=split, data_options=data_options, batch_size=batch_size, limit=limit,
                       json_out=json_out, no_vector_cache=no_vector_cache, fusion=fusion, tune_split=tune_split,
                       tune_measure=tune_measure,
                       others={"--finetune": finetune, "--zero-shot": zero_shot, "--set": settings,
                               "--backbone": backbone, "--row": row_labels, "--out": out, "--seeds": seeds > 1})


def _only_system_tables(fusion, tune_split) -> None:
    """--fusion and --tune, given to a bench job other than --system tables."""
    if fusion or tune_split:
        raise click.UsageError("--fusion and --tune go with --system tables (hybrid systems such as bm25+minilm)")


def _training_table(*, data_options, settings, backbone, seeds, batch_size, limit, json_out, fusion,
                    tune_split) -> dict:
    """What ``bench --suite`` and ``bench --recipe`` check and pass alike: the keywords of bench_suite and
    bench_recipes."""
    _only_system_tables(fusion, tune_split)
    if json_out:
        raise click.UsageError("--json is for --system tables; with --recipe/--suite use --out DIR (results.json)")
    return dict(data_options=api.parse_options(data_options), settings=api.parse_settings(settings),
                backbone=backbone, seeds=seeds, batch_size=batch_size, limit=limit)


def _bench_suite(suite, data, row_labels, out, *, others, **training) -> None:
    """``bench --suite NAME``: a paper's table (or a suite .toml's), its rows trained and scored."""
    common = _training_table(**training)
    if any(others.values()):
        raise click.UsageError("--suite names its own rows; leave out --recipe, --finetune and --zero-shot")
    _write_table(api.bench_suite(suite, list(data), rows=list(row_labels), **common), out)


def _bench_recipes(recipes, data, systems, out, *, split, finetune, zero_shot, **training) -> None:
    """``bench --recipe``: each recipe trained on every --data's train split and scored on its test split."""
    common = _training_table(**training)
    if split:
        raise click.UsageError("--recipe trains on each dataset's train split and scores its test split; "
                               "leave out --split")
    _write_table(api.bench_recipes(list(recipes), list(data), finetune=finetune, zero_shot=zero_shot,
                                   systems=list(systems), **common), out)


def _write_table(ran, out) -> None:
    """A training table printed, and written with its results.json and plot to --out."""
    click.echo(ran.table.markdown())
    paths = ran.table.write(out or "bench-out")
    click.echo(f"wrote {paths['md']}, {paths['json']} and {paths['png']} ({ran.summary()})", err=True)


def _bench_systems(systems, data, *, split, data_options, batch_size, limit, json_out, no_vector_cache, fusion,
                   tune_split, tune_measure, others) -> None:
    """``bench --system``: systems scored on one dataset (the mined standard library by default)."""
    for flag, given in others.items():
        if given:
            raise click.UsageError(f"{flag} goes with --recipe or --suite")
    if len(data) > 1:
        raise click.UsageError("--system tables score one --data; give several with --recipe")
    systems = list(systems) or [defaults.LEXICAL, defaults.BACKBONE, f"{defaults.LEXICAL}+{defaults.BACKBONE}",
                                f"{defaults.FIELDS_LEXICAL}+{defaults.BACKBONE}"]
    _preflight(data=data, data_options=data_options, systems=systems)
    fusion_spec = _fusion(fusion)
    if tune_split and not data:
        raise click.UsageError("--tune needs --data with a validation split; the default data (the mined standard "
                               "library) is all test data")
    if tune_split and tune_split == (split or "test"):
        raise click.UsageError(f"--tune {tune_split} would choose the fusion on the split that is scored; tune on "
                               f"another split (e.g. --tune valid)")
    if not data:
        dataset = api.default_dataset(split=split)
    else:
        dataset = _read(data[0], split or "test", data_options, need=("documents", "queries"))
    tune = _read(data[0], tune_split, data_options, need=("documents", "queries")) if tune_split else None
    result = api.run_bench(dataset, systems, batch_size=batch_size, limit=limit, vector_cache=not no_vector_cache,
                           fusion=fusion_spec, tune=tune, tune_measure=tune_measure)
    click.echo(result.markdown())
    if json_out:
        result.write_json(json_out)
        click.echo(f"wrote {json_out}", err=True)


def _bench_folders(suite, data_root, systems, split, batch_size, limit, out, no_vector_cache, *, fusion, tune_split,
                   others) -> None:
    """``bench --suite NAME --data-root PATH``: a suite built from folders of data (CoIR's)."""
    _only_system_tables(fusion, tune_split)
    if not suite:
        raise click.UsageError("--data-root goes with --suite NAME, a suite built from folders of data "
                               "('structret plugins --kind suite' lists the suites), e.g. --suite coir")
    if not api.suite_needs_root(suite):
        raise click.UsageError(f"--data-root goes with a suite built from folders of data; '{suite}' is not one "
                               f"('structret plugins --kind suite' lists them): leave out --data-root")
    if not data_root:
        about = next((e.help for e in api.list_plugins("suite") if e.name == suite), "")  # what the plugin says
        raise click.UsageError(f"--suite {suite} is built from folders of data ({about}): give --data-root PATH, "
                               f"the folder holding them")
    given = [flag for flag, value in others.items() if value]
    if given:
        raise click.UsageError(f"--suite {suite} --data-root takes --system, --split, --limit, --batch-size, --out; "
                               f"leave out {', '.join(given)}")
    systems = list(systems) or [defaults.LEXICAL, defaults.BACKBONE]
    _preflight(data=(), data_options=(), systems=systems)
    table = api.bench_folders(suite, data_root, systems, batch_size=batch_size, limit=limit,
                              vector_cache=not no_vector_cache, split=split or "test")
    click.echo(table.markdown())
    paths = table.write(out or f"bench-out/{suite}")
    click.echo(f"wrote {paths['md']}, {paths['json']} and {paths['png']}", err=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
