"""Exceptions of our own: each message says what is wrong, where (file, line, key) and the fix."""

from __future__ import annotations


class PlstitchError(Exception):
    """Base class of every error the CLI turns into one red line and a non-zero exit."""


class ConfigError(PlstitchError, ValueError):
    """A setting or argument that cannot work (unknown name, bad value, conflicting options)."""


class DataError(PlstitchError, ValueError):
    """A dataset file is missing or malformed; the message names the file and line."""


class DecodeError(DataError):
    """A video or image could not be decoded; the message names the file."""


class CheckpointError(PlstitchError, ValueError):
    """A checkpoint does not match the model it should fill; the message lists the keys."""


class UnsafeCheckpointError(CheckpointError):
    """A pickle checkpoint needs arbitrary code execution to load and was refused."""


class ModelNotFoundError(PlstitchError, FileNotFoundError):
    """A model is neither in the local cache nor reachable; the message names repo, file and revision."""


class FeatureStoreError(PlstitchError, ValueError):
    """A feature store is missing, inconsistent or would be mixed with incompatible features."""


class EvaluationError(PlstitchError, ValueError):
    """Inputs to an evaluation are inconsistent (lengths, classes, NaN); the message names the video."""


class RunFolderError(PlstitchError, ValueError):
    """A file of a training run folder is unreadable or not what the trainer writes; the message names it."""


class TrainingError(PlstitchError, RuntimeError):
    """Training cannot start or resume (bad checkpoint, mismatched config, non-finite loss)."""


class PublishError(PlstitchError, RuntimeError):
    """An export or upload was refused (pickles, a folder that does not load, missing token)."""
