"""The bundled tiny model zoo: deterministic data, tokenizer, training and manifests."""
