"""The hooks a structret plugin implements.

A plugin is a module registered under the ``structret`` entry-point group. It
implements any of the hooks below with ``@structret.hookimpl``; each hook gets a
``register`` callback and calls it once per thing it provides::

    register(name, target, *, aliases=(), help="", options=None)

``target`` is either the factory itself or a lazy ``"package.module:attr"`` string.
Prefer the string: the module is imported only when a pipeline asks for that name,
so ``structret --help`` never pays for torch, transformers or tree-sitter.

``options`` is the plugin's options model (a ``structret.options.Options`` subclass, or a
lazy ``"module:Class"`` string naming one in a module that imports nothing heavy): each
field an option with its type, default and docstring. The registry validates and completes
the options a user gives with that model, then calls the factory: a factory with a parameter
named ``options`` is handed the model's instance (``def mep(options: EntityMasking)``, read as
``options.extractor``), with core's arguments (``structret.options.CORE_ARGUMENTS``: a reader's
``path`` and ``split``, an index's ``dim`` and ``metric``) as before; any other factory gets
every option as a keyword argument. A factory that Python code also calls with single options
(``HFEncoder(path, pooling="mean")``) takes ``options=None, **given`` and reads them through
``structret.plugin.resolve_options``, so one model checks both. Recipes give the options in a
table named after the plugin (``[mep] extractor = "tree-sitter"``, ``--set mep.extractor=``),
and ``structret plugins --options NAME`` prints them. Without a model, the options are read off
the factory's signature (no documentation, and the factory's module is imported to do so).

Every hook is called once per process when the registry is first built.
What the factory must return is described on each hook; ``structret.contracts``
holds the matching ``typing.Protocol`` classes with everything core calls, and the rules
core checks; ``structret.testing.check_plugin(kind, name)`` runs them against a plugin.
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("structret")
hookimpl = pluggy.HookimplMarker("structret")


@hookspec
def register_datasets(register):
    """Register dataset readers.

    Factory: ``reader(path: str, *, split: str | None = None, **options) -> Dataset``.
    ``path`` is whatever follows ``FORMAT:`` in ``--data FORMAT:PATH``. The reader
    must skip and count malformed rows in ``Dataset.stats`` (with file:line), never
    raise from deep inside, and raise ``structret.errors.DataError`` for input it
    cannot read at all.
    """


@hookspec
def register_backbones(register):
    """Register encoder backbones.

    Factory: ``backbone(model: str | None = None, **options) -> Backbone`` (or
    ``backbone(model=None, options: MyOptions | None = None, **given)``, handed the validated
    options model; see the module's docstring); ``model`` is a hub id or local path overriding
    the plugin's default weights. The object
    encodes texts to a float32 ``numpy`` matrix and declares ``capabilities``
    (``encoder``, ``seq2seq``, ``mlm``, ``structure-attention``) so objectives
    can check they fit before training starts.

    To be trained, a backbone also offers ``tokenize(texts, kind=, max_length=)`` (a
    tensor batch), ``embed(batch, kind=)`` (vectors with gradients; ``kind`` lets a
    two-tower backbone pick its query encoder), ``train_forward(batch, labels)`` ->
    ``(vectors, lm_loss)``, ``training_module`` (the ``nn.Module`` owning every trained
    parameter) and ``save_pretrained(directory)``. With ``structure-attention`` the
    document batch carries ``parents`` and a document forward leaves the informed
    head's attention per layer in ``last_attention``.
    """


@hookspec
def register_indexes(register):
    """Register vector indexes.

    Target: a class, called as ``Index(dim, metric="ip", **options)``, with a
    classmethod ``load(path)``. Instances implement ``add(ids, vectors)``,
    ``search(queries, k) -> (scores, ids)``, ``save(path, meta)`` and ``len()``.
    Save through ``structret.artifacts.atomic_dir`` so an interrupted save leaves
    the previous index loadable. The full contract is on ``structret.contracts.Index``;
    ``tests/test_index_contract.py`` runs it against every registered index.
    """


@hookspec
def register_retrievers(register):
    """Register whole retrievers that are not a backbone plus an index (BM25, say).

    Factory: ``retriever(**options) -> Retriever`` with ``fit(docs)`` and
    ``score(queries, doc_indices=None) -> ndarray``. Any backbone name is also
    usable wherever a retriever is asked for; it becomes a dense retriever.
    """


@hookspec
def register_miners(register):
    """Register function miners, one per programming language (``structret mine``).

    Name: the language (``python``, ``go`` ...). Factory: ``miner() -> Miner`` with
    ``extensions`` (file suffixes it reads) and ``functions(source, path)`` returning
    ``list[MinedFunction]``; it raises ``SyntaxError`` for a file it cannot parse,
    which ``structret mine`` skips and counts. CodeSearchNet's filters, de-duplication
    and the split are applied by ``structret mine`` itself, the same for every language.
    """


@hookspec
def register_chunkers(register):
    """Register chunkers: how ``structret index SOURCE`` cuts a project's files into search units.

    Factory: ``chunker(**options) -> Chunker`` with ``language(path, head)`` (the language of a file it
    reads, from its name and first bytes ``head``; ``"text"`` for a text file; None for one it leaves out)
    and ``chunk(text, path, language=None)`` returning ``list[structret.records.Unit]`` that tile the
    file: every line in exactly one unit, in order. A file it cannot cut raises ``ValueError`` (or
    ``SyntaxError``), which the index skips and counts. Units are not training rows: ``structret mine``
    uses the miners.
    """


@hookspec
def register_extractors(register):
    """Register entity extractors (what masked entity prediction masks).

    Factory: ``extractor(**options) -> Extractor`` whose ``extract(text, language=None)``
    returns ``list[Entity]``: character spans into ``text``, never token positions,
    so any tokenizer can be aligned to them.
    """


@hookspec
def register_linearizers(register):
    """Register structure linearizers.

    Factory: ``linearizer(**options) -> Linearizer`` whose ``linearize(record)``
    returns a ``Sequence``: tokens plus, optionally, each token's parent index
    (-1 for the root), or ``None`` when the record cannot be linearized (the
    caller skips and counts it).
    """


@hookspec
def register_objectives(register):
    """Register pretraining and fine-tuning objectives (``sda``, ``mep``, ...).

    Factory: ``objective(**options) -> Objective``, called with its options (the run's
    ``[name]`` table, checked by the options model it registers; a factory with a parameter
    named ``options`` is handed the model's instance instead: ``mep(options: EntityMasking)``).
    What the object has is declared once, by ``structret.contracts.Objective`` and its three role Protocols
    (``ContrastiveObjective``, ``CorruptionObjective``, ``AuxiliaryObjective``): the registry
    checks each objective it makes against them (rules ``objective-*``). In short: a
    contrastive objective scores gathered query and passage vectors, a corruption objective
    corrupts the passage batch for an LM loss on the same forward, an auxiliary objective
    adds a loss on that forward. ``--objective a+0.5*b`` sums the weighted losses; at most
    one contrastive and one corruption objective per run. Inherit
    ``structret.plugin.ObjectiveDefaults`` for the optional members.
    """


@hookspec
def register_protocols(register):
    """Register evaluation protocols, one per task a dataset can declare.

    Name: the task (``Dataset.task``, e.g. ``code-search``); ``structret bench``,
    suites and ``structret.evaluation.evaluate`` evaluate a dataset with the protocol
    registered under its task. Target: a class, called as ``Protocol(dataset, limit)``
    (``limit``: the first N queries, or ``None``), with ``name`` (the table title),
    ``columns`` (its measures, in order), ``notes`` (sentences for under the table),
    ``sizes`` (``{"queries": n, ...}``), ``doc_texts``, ``bind(document, query)``
    (how the system reads records and queries; sets ``doc_texts``),
    ``query_texts()`` and ``evaluate(retriever) -> {column: value or None}``. The
    full contract is ``structret.contracts.EvaluationProtocol``.
    """


@hookspec
def register_recipes(register):
    """Register training recipes (``structret train --recipe NAME``, ``bench --recipe NAME``).

    Target: a ``pathlib.Path`` to a TOML file, read when the recipe is used: core fields
    (``objective``, ``backbone``, ``lr``, ...) and one table per plugin it configures
    (``[mep]``), as ``structret.recipes`` describes; ``description`` and ``reproduces`` are
    what ``structret train --list-recipes`` prints. ``help``: that description, one line.
    A recipe file anywhere on disk is used by its path without registering it; registering
    names it, so that suites and users can refer to it.
    """


@hookspec
def register_suites(register):
    """Register bench suites: a paper's table (``structret bench --suite NAME``).

    Target: a ``pathlib.Path`` to a suite TOML file (its datasets and metrics as columns, its
    rows as recipes, the paper's numbers; ``structret.suites.files`` reads it), or a lazy
    ``"module:function"`` building a table from folders of data (``--data-root``): called as
    ``function(root, systems, *, batch_size, limit, vector_cache, split) -> BenchTable``
    (``structret.plugin.BenchTable``), ``systems`` being the ``--system`` names to score.
    """


@hookspec
def register_commands(register):
    """Register commands of the ``structret`` command line.

    Name: the command (``structret NAME``). Target: a ``click.Command`` (lazy
    ``"module:attr"``, imported when the command runs or ``structret --help`` lists it, so
    its module imports click and ``structret.api`` only, and anything heavy inside the
    command). Parse, call ``structret.api`` (or the plugin's own Python API), print: the
    command line adds no logic of its own. A name core already uses stays core's, with a
    warning naming the plugin.
    """
