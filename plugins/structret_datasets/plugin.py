from structret import hookimpl
from structret.records import COIR_RANKING, CODE_SEARCH, GRADED_RERANK, MULTI_ANSWER_RANKING, QRELS_RANKING

OPTIONS = "structret_datasets.options"  # the readers' options, declared apart: listing them reads no file


@hookimpl
def register_datasets(register):
    register(
        "codesearchnet",
        "structret_datasets.codesearchnet:read",
        options=f"{OPTIONS}:CodeSearchNet",
        aliases=("csn",),
        help="CodeSearchNet jsonl(.gz): a file, a glob, or {lang}/final/jsonl/{split}/; also what 'structret mine' writes",
    )
    register(
        "adv",
        "structret_datasets.adv:read",
        options=f"{OPTIONS}:Adv",
        aliases=("codexglue-adv",),
        help="CodeXGLUE NL-code-search-Adv jsonl: query = url, code = idx",
    )
    register(
        "esci",
        "structret_datasets.esci:read",
        options=f"{OPTIONS}:ESCI",
        help="Amazon ESCI shopping queries: examples + products parquet, E/S/C/I labels",
    )
    register(
        "esci-santa-pretrain",
        "structret_datasets.esci:read_santa_pretrain",
        options=f"{OPTIONS}:Categories",
        help="SANTA's product pretraining pairs from ESCI (large, us, E): a random bullet point -> title + description",
    )
    register(
        "debian-packages",
        "structret_datasets.debian:read",
        options=f"{OPTIONS}:DebianPackages",
        aliases=("debian",),
        help="Debian/Ubuntu package index (Packages[.gz|.xz|.lz4], apt lists folder): synopsis -> package, "
        "section/priority/debtags aspects",
    )
    register(
        "beir",
        "structret_datasets.beir:read",
        options=f"{OPTIONS}:Reader",
        help="BEIR-style folder: corpus.jsonl, queries.jsonl, qrels/{split}.tsv",
    )
    register(
        "coir",
        "structret_datasets.coir:read",
        options=f"{OPTIONS}:Reader",
        help="a CoIR task folder (BEIR layout: corpus.jsonl, queries.jsonl, qrels/test.tsv), scored as CoIR scores it",
    )
    register(
        "cosqa",
        "structret_datasets.cosqa:read_cosqa",
        options=f"{OPTIONS}:Reader",
        help="CoSQA (CoCLR's data/search): code_idx_map.txt + cosqa-retrieval-{test,dev}-500.json, or cosqa-train.json",
    )
    register(
        "cosqa-plus",
        "structret_datasets.cosqa:read_cosqa_plus",
        options=f"{OPTIONS}:Reader",
        help="CoSQA+: final_augment_codebase.json, query.json, final_augment_query_code_pairs_for_search.json",
    )
    register(
        "ma-amazon",
        "structret_datasets.ma_amazon:read",
        options=f"{OPTIONS}:Reader",
        help="ATTEMPT's MA-Amazon: amazon_corpus_with_cate_clean.jsonl + {train,dev,test}_qrel.txt; "
        "brand/color/category_1-4 aspects, ATTEMPT's full-corpus R@100, R@500, nDCG@50",
    )
    register(
        "tevatron",
        "structret_datasets.tevatron:read",
        options=f"{OPTIONS}:Reader",
        help="Tevatron training lines jsonl(.gz): query, positive_passages, negative_passages (structret negatives writes them)",
    )


@hookimpl
def register_protocols(register):
    # the readers above declare these tasks (Dataset.task); a plugin with a new task
    # registers its protocol the same way
    register(
        CODE_SEARCH,
        "structret.evaluation.protocols:CodeSearch",
        help="one aligned document per query: MRR@100 over the full pool, CodeSearchNet's 999-distractor MRR",
    )
    register(
        GRADED_RERANK,
        "structret.evaluation.protocols:GradedRerank",
        help="graded judgements (ESCI): each query reranks its judged documents, NDCG@100 two- and four-class",
    )
    register(
        QRELS_RANKING,
        "structret.evaluation.protocols:QrelsRanking",
        help="any qrels (BEIR, Debian test): the whole corpus ranked, nDCG@10, R@100, MRR@10 or the dataset's measures",
    )
    register(
        COIR_RANKING,
        "structret.evaluation.protocols:CoirRanking",
        help="a CoIR task: the whole corpus ranked, nDCG@10 as CoIR computes it (identical ids ignored)",
    )
    register(
        MULTI_ANSWER_RANKING,
        "structret.evaluation.protocols:MultiAnswerRanking",
        help="several answers per query (CoSQA+): the whole corpus ranked, CoSQA+'s MMRR, nDCG@10, R@100, MRR@10",
    )
