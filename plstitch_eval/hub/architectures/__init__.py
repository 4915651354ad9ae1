"""Encoder architectures built in code (clip models, DINOv3, V-JEPA 2, raw pixels): each
builder and its state-dict layout; the converters in `hub/converters.py` register them."""
