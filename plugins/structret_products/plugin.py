"""Product linearizers and objectives. Targets are lazy: torch loads only when a run names an objective."""

from structret import hookimpl


@hookimpl
def register_linearizers(register):
    module = "structret_products.linearizers"
    register(
        "aspects",
        f"{module}:aspects",
        options="structret_products.options:AspectsLayout",
        help="[BRAND] brand [COLOR] color ... [SEP] [C] title content: one indicator per aspect (ATTEMPT)",
    )
    register("product", f"{module}:product", options="structret_products.options:Product", help="'title : {t} text : {d}', SANTA's product template (OpenMatch)")


@hookimpl
def register_objectives(register):
    module = "structret_products.objectives"
    register(
        "aspect-mlm",
        f"{module}:aspect_mlm",
        options="structret_products.options:AspectMLM",
        help="aspect-content mutual prediction: content MLM + aspect->content + content->aspect views (ATTEMPT); LM-head warm-up first where the head is new (lm_warmup)",
    )
    register(
        "aspect-class",
        "structret_products.classification:aspect_class",
        options="structret_products.options:AspectClassification",
        help="one classification head per aspect on the pooled vector, beside mlm (MTBERT)",
    )
    register(
        "aspect-predict",
        "structret_products.classification:aspect_predict",
        options="structret_products.options:AspectPrediction",
        help="one classification head per aspect on that aspect's slot in the encoder, beside mlm (MADRAL)",
    )
    register(
        "mlm",
        f"{module}:mlm",
        options="structret_products.options:MaskedLM",
        help="BERT MLM on the content (BIBERT), or on the aspects layout (-C), aspects at their own ratio (-C(A)); LM-head warm-up first where the head is new (lm_warmup)",
    )
