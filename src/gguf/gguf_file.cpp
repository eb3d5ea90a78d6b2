// filled by the GGUF reader
