"""An example structret plugin, built step by step in docs/plugins.md."""
