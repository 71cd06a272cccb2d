"""Structurally-informed attention (Khan & Jang): a small encoder whose first layers have
one head that attends from each AST token to its parent, supervised or set to the gold tree."""
