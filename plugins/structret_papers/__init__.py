"""Built-in recipes and bench suites: the papers' pipelines and tables (SANTA, Khan & Jang,
ATTEMPT and its baselines, CoIR's leaderboard) and the toolkit's own CPU-sized ones
(``minilm-code``, ``code-hybrid``). Core knows none of them by name: they are registered like a
third party's (``register_recipes``, ``register_suites``) and read from the TOML files here."""
