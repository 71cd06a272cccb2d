from pathlib import Path

from structret import hookimpl

HERE = Path(__file__).parent


def _description(file: Path) -> str:
    """The file's ``description`` line, for ``structret plugins`` (a full TOML parse waits until it is used)."""
    for line in file.read_text(encoding="utf-8").splitlines():
        if line.startswith(("description", "title")) and "=" in line:
            return line.partition("=")[2].strip().strip('"')
    return ""


@hookimpl
def register_recipes(register):
    for file in sorted((HERE / "recipes").glob("*.toml")):
        register(file.stem, file, help=_description(file))


@hookimpl
def register_suites(register):
    for file in sorted((HERE / "suites").glob("*.toml")):
        register(file.stem, file, help=_description(file))
    register("coir", "structret_papers.coir:coir_table",
             help="CoIR's leaderboard: every --system on every task folder under --data-root (each with corpus.jsonl, "
                  "queries.jsonl, qrels/test.tsv), nDCG@10 as CoIR computes it")
    register("semble", "structret_papers.semble:semble_table",
             help="semble's code-search benchmark: every --system indexes each repository under --data-root "
                  "(repos.json, annotations/, repos/) and answers its queries; NDCG@10 as semble's harness scores")


@hookimpl
def register_commands(register):
    register("plot", "structret_papers.plot:plot", help="SANTA's Figures 3 and 4 for two or more models")
