"""A training run's folder over its life: plan it (new, resume, finished, overwrite), seed and save its RNG,
checkpoint it, log it, stop it on a signal, show its progress, and read back how far it got.
"""
