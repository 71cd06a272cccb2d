"""``structret plot``: SANTA's Figures 3 and 4 (structret_papers.figures) from the command line.
A plugin command: registered with ``register_commands``, listed by ``structret --help`` beside
core's own, parsed here and run through the public API."""

import click

from structret import api


@click.command()
@click.option("--data", "-d", required=True, help="FORMAT:PATH of aligned (query, document) pairs, e.g. "
              "codesearchnet:stdlib.jsonl.gz")
@click.option("--split", default="test", show_default=True, help="Split to sample the pairs from.")
@click.option("--data-option", "data_options", multiple=True, metavar="KEY=VALUE",
              help="Reader option, repeatable (e.g. limit=2000).")
@click.option("--model", "-m", "models", multiple=True, required=True, metavar="NAME_OR_RUN",
              help="A backbone name, a 'structret train' run directory or a model folder; give two or more.")
@click.option("--label", "labels", multiple=True, metavar="TEXT",
              help="Name of each --model in the figures, in the same order (default: the names as given).")
@click.option("--out", "-o", required=True, type=click.Path(file_okay=False),
              help="Folder for ranking-probability.png and embeddings-2d.png.")
@click.option("--pairs", "-n", type=int,
              help="Aligned pairs sampled from the split (seeded); both figures use the same ones. "
                   "Default: 200, or every pair when the split has fewer.")
@click.option("--pool", type=click.Choice(["sampled", "full"]), default="sampled", show_default=True,
              help="Candidates of the softmax: the sampled pairs' documents (in-batch, as SANTA's SDA loss) "
                   "or every document of the split.")
@click.option("--similarity", type=click.Choice(["cos", "dot"]),
              help="Score of the softmax (default: what the trained runs record, else cos).")
@click.option("--temperature", type=float,
              help="Scores are divided by it (default: what the trained runs record, else 0.05, minilm-code's).")
@click.option("--projection", type=click.Choice(["tsne", "umap"]), default="tsne", show_default=True,
              help="2-D projection of Figure 4 (umap needs umap-learn).")
@click.option("--links", is_flag=True, help="Draw a line from each docstring to its code in Figure 4.")
@click.option("--seed", default=0, show_default=True, help="Seed of the sample and of the projection.")
@click.option("--batch-size", default=32, show_default=True)
@click.option("--no-verify", is_flag=True,
              help="Use runs even if their files do not match their checksums.json (or it is missing); a warning "
                   "on stderr names each one not checked.")
def plot(data, split, data_options, models, labels, out, pairs, pool, similarity, temperature, projection, links, seed,
         batch_size, no_verify):
    """SANTA's Figures 3 and 4 for two or more models, as PNGs and numbers.

    Samples --pairs aligned (query, document) pairs of the split and writes into OUT:
    ranking-probability.png, the distribution of p(positive | query) = softmax(score /
    temperature) over the --pool candidates (SANTA Fig. 3a), and embeddings-2d.png, the
    docstring and code embeddings of the same pairs projected to 2-D (Fig. 4). One scoring
    is used for every model so the distributions compare. Prints mean and median
    probability per model, and alignment numbers: mean cosine of matched vs mismatched
    pairs, and how often a docstring's nearest code in 2-D is its own.

    \b
    Example:
      structret train --recipe minilm-code --data codesearchnet:stdlib.jsonl.gz --set max_steps=10 --out runs/sda
      structret plot --data codesearchnet:stdlib.jsonl.gz --split test --model minilm --model runs/sda --out figs
      structret plot --data codesearchnet:stdlib.jsonl.gz --model minilm --model runs/sda --projection umap \\
          --pairs 64 --links --label zero-shot --label "SDA, 10 steps" --out figs
    """
    if len(models) < 2:
        raise click.UsageError("give at least two --model to compare, e.g. --model minilm --model runs/sda")
    options = api.parse_options(data_options)
    api.check_names(data=[data], data_options=options)  # a typo fails before any data is read
    from structret_papers.figures import plot_figures

    with api.unverified(no_verify):
        report = plot_figures(list(models), data, out, split=split, data_options=options, pairs=pairs, pool=pool,
                              similarity=similarity, temperature=temperature, projection=projection, links=links,
                              seed=seed, batch_size=batch_size, labels=list(labels) or None,
                              echo=lambda line: click.echo(line, err=True))
    click.echo(report.summary())
