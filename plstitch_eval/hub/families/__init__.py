"""The shipped encoders, one module per family, each registering its `ModelEntry`s where it
defines them (`hub/model_registry.register`); `hub/registry.py` imports them all."""
