"""Search: a retrieval system resolved once from its name (``system``), how a lexical and a dense
ranking fuse (``fusion``), and saved indexes built and searched (``build``, ``index``).

Scoring a dataset (bench, tuning, suites) and searching an index (index, search, serve, mcp)
both come through here, so a system fuses the same way wherever it is used."""
