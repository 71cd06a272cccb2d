"""Built-in pretraining and fine-tuning objectives: sda, mep, span-mask, dr."""
