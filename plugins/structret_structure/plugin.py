from structret import hookimpl


@hookimpl
def register_backbones(register):
    register(
        "informed-transformer",
        "structret_structure.model:InformedTransformer",
        options="structret_structure.options:InformedTransformer",
        help="small transformer over DFS-linearized code with a parent-attending head (Khan & Jang); "
             "--model DIR from structret_structure.model.initialize or a trained run",
    )


@hookimpl
def register_objectives(register):
    register(
        "parent-attention",
        "structret_structure.objective:parent_attention",
        options="structret_structure.options:ParentAttention",
        help="cross-entropy of the informed head's attention against each code token's AST parent",
    )
