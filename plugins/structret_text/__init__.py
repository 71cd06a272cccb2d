"""Built-in text plugins: noun-based entity extractors for product descriptions (SANTA's product rule)."""
