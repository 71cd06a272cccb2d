"""Built-in product plugins: the ``aspects`` (ATTEMPT) and ``product`` (SANTA) linearizers and
the ``aspect-mlm`` (ATTEMPT) and ``mlm`` (BIBERT, BIBERT-C, BIBERT-C(A)) objectives."""
