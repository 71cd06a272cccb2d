"""``structret distill``: a static token table made from a transformer (structret_backbones.static.distill).
A plugin command: registered with ``register_commands``, parsed here, run through the public API and
the plugin's own ``distill``."""

import click

from structret import api


@click.command()
@click.option("--model", "-m", default="minilm", show_default=True, metavar="NAME_OR_RUN",
              help="The transformer to distill: a backbone name, a 'structret train' run or a model folder.")
@click.option("--out", "-o", required=True, type=click.Path(file_okay=False),
              help="Folder for the static model (model2vec layout: tokenizer.json, model.safetensors, config.json).")
@click.option("--dims", default=256, show_default=True, type=click.IntRange(min=0),
              help="Dimensions kept by PCA (0: the transformer's own).")
@click.option("--data", "-d", metavar="FORMAT:PATH",
              help="Texts whose token counts weigh the rows (documents and queries), e.g. the training data; "
                   "default: the token's rank in the vocabulary.")
@click.option("--split", help="Split of --data to count (default: every row).")
@click.option("--data-option", "data_options", multiple=True, metavar="KEY=VALUE",
              help="Reader option, repeatable (e.g. limit=50000).")
@click.option("--sif", default=1e-3, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Weight of a token: sif / (sif + its probability); lower: frequent tokens count less.")
@click.option("--backbone-option", "backbone_options", multiple=True, metavar="KEY=VALUE",
              help="Option of the transformer's backbone, repeatable (e.g. dtype=fp32).")
def distill(model, out, dims, data, split, data_options, sif, backbone_options):
    """Make a static embedding model from a transformer: every token's vector, PCA, frequency weights.

    Each vocabulary token goes through the transformer alone (30,522 short forwards for MiniLM,
    about half a minute on 2 cores) and is pooled as the model pools; the table that results
    encodes a text as the mean of its tokens' rows, with no transformer: thousands of texts a
    second. Load it wherever a model goes (--model OUT); train it further with
    'structret train --backbone static --model OUT'.

    \b
    Example:
      structret distill --model minilm --out models/minilm-static
      structret distill --model runs/sda --data codesearchnet:corpus/python/train.jsonl.gz --out models/sda-static
      structret index ~/src/project --model models/minilm-static --out runs/project
      structret train --backbone static --model models/minilm-static --objective sda \\
          --data codesearchnet:corpus/python/train.jsonl.gz --set lr=0.01 --out runs/static
    """
    opened = api.load_model(model, **api.parse_options(backbone_options))
    backbone = opened.backbone
    if not hasattr(backbone, "tokenizer") or not hasattr(backbone, "embed"):
        raise click.UsageError(f"{model} encodes through {type(backbone).__name__}, which has no token-level "
                               f"forward to distill; give a transformer backbone, run or model folder.")
    texts = None
    if data:
        options = api.parse_options(data_options)
        api.check_names(data=[data], data_options=options)
        dataset = api.load_dataset(data, split, **options)
        texts = [opened.text(record, "document") for record in dataset.corpus.values()]
        texts += [query.text for query in dataset.queries.values()]
    from structret_backbones.static import distill as make

    done = make(backbone, out, dims=dims or None, corpus=texts, sif=sif)
    click.echo(f"distilled {model} into {out}: {done['tokens']} tokens x {done['dim']} dimensions"
               + (f" ({done['explained_variance']:.1%} of the variance kept)" if dims else "")
               + (f", weights from {done['frequency_texts']} texts' token counts" if done["frequency_texts"]
                  else ", weights from vocabulary rank"))
