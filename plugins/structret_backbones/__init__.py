"""Built-in backbones: Hugging Face encoders (cls/mean pooling) and T5 (first decoder position)."""
