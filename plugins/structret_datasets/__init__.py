"""Built-in dataset readers: CodeSearchNet, CodeXGLUE Adv, ESCI, BEIR-style."""
