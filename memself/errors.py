"""One error hierarchy: the CLI maps it to exit 1 and one line, the hook path logs it."""


class MemselfError(Exception):
    """An expected failure with a message fit to show the user (Chinese)."""


class InvalidInput(MemselfError):
    """The caller gave something we refuse: a bad text length, an unknown id, a bad value."""


class NotFound(MemselfError):
    """An id that is not in the store (or the trash)."""


class LockTimeout(MemselfError):
    """The cross-process write lock could not be taken in time."""


class CorruptFile(MemselfError):
    """A data file could not be fully read; strict operations refuse to rewrite it."""


class ConfigError(MemselfError):
    """A config value that does not validate."""


class ModelUnavailable(MemselfError):
    """The embedding model could not be downloaded, prepared or loaded."""


class EngineUnavailable(MemselfError):
    """The warm recall engine is not reachable or not ready."""


class WriteFailed(MemselfError):
    """A write could not complete (read-only folder, full disk); the old file is intact."""


class KeyEndpointMismatch(MemselfError):
    """The judge endpoint configured now is not the one the API key was entered for."""


class KeyUnconfirmed(MemselfError):
    """The API key is in the original's format (no endpoint) and the user has not yet confirmed
    which endpoint it may go to."""


class KeyFileInvalid(MemselfError):
    """``side-secret.json`` exists but cannot be read or does not hold a usable key."""


class SecretUnavailable(MemselfError):
    """The local session secret is invalid and could not be replaced (full disk, read-only)."""


class LockBroken(MemselfError):
    """The lock path is something no lock protocol can clear (a file, a folder of foreign files)."""


class LockLost(MemselfError):
    """Another program took the write lock, or changed a file, while we held it: nothing written."""
