"""Data: video decoding (`video`), dataset adapters (`datasets`) and the synthetic dataset (`synthetic`)."""
