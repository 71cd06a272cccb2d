"""Searching one project: a source folder indexed as its files change (index), the manifest of its files
(files), their vectors and the model's ONNX copy (vectors), and the whole-project benchmark (benchmark)."""
