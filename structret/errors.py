"""Errors that reach the user. Each message says what was wrong, where, and what to do."""


class StructretError(Exception):
    """Base class: the CLI prints these as one clean message, without a traceback."""


class PluginError(StructretError):
    """A plugin is missing, misnamed, duplicated or broken."""


class OptionError(PluginError, ValueError):
    """An option a plugin was given is not one of its options, or has a value it does not take;
    the message lists the plugin's options."""


class ContractError(PluginError):
    """A plugin broke its contract (structret/contracts.py): the message names the plugin and the rule."""


class DataError(StructretError):
    """Input data cannot be read at all (a single bad row is skipped and counted instead)."""


class ModelLoadError(StructretError):
    """Model weights or a tokenizer could not be loaded."""


class ArtifactError(StructretError):
    """A saved index or embedding file is missing, truncated or does not match."""


class TrainingError(StructretError):
    """A run cannot start or continue as asked."""


class RecipeError(StructretError, ValueError):
    """A recipe cannot be found, read or resolved."""


class SuiteError(StructretError, ValueError):
    """A suite file cannot be found or read, or a bench table cannot be built."""


class ObjectiveError(StructretError, ValueError):
    """An objective spec is malformed, or an objective cannot run on the chosen backbone."""


class RecipeWarning(UserWarning):
    """A recipe setting that is not used, or written the old way; the run goes ahead."""


class ExportError(StructretError):
    """A run that cannot be exported faithfully, or an export that does not match it."""
