"""Built-in objectives. Targets are lazy: torch loads only when a run names one."""

from structret import hookimpl


@hookimpl
def register_objectives(register):
    register(
        "sda",
        "structret_objectives.contrastive:sda",
        options="structret_objectives.options:Contrastive",
        help="structured data alignment: text vs. every structured document of the global batch (SANTA)",
    )
    register(
        "dr",
        "structret_objectives.contrastive:dr",
        options="structret_objectives.options:Contrastive",
        help="dense retrieval fine-tuning: query vs. in-batch documents + hard negatives",
    )
    register(
        "mep",
        "structret_objectives.lm:mep",
        options="structret_objectives.options:EntityMasking",
        help="masked entity prediction: entities -> sentinels (seq2seq) or whole-entity [MASK] (mlm) (SANTA); LM-head warm-up first where the head is new (lm_warmup)",
    )
    register(
        "span-mask",
        "structret_objectives.lm:span_mask",
        options="structret_objectives.options:SpanMasking",
        help="random span corruption, noise 0.15, mean span 3 (T5); random-span MLM on mlm backbones; LM-head warm-up first where the head is new (lm_warmup)",
    )
