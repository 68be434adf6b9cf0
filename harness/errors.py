"""Error types the CLI turns into exit statuses, so no user mistake ends in a traceback."""


class UserError(Exception):
    """Bad input or an impossible request: one line on stderr, exit status 2."""

    exit_status = 2


class NeedsRoot(UserError):
    """A root-only command run without root."""


class Unavailable(Exception):
    """A mechanism this host lacks; carries the probe's reason. Exit status 3."""

    exit_status = 3


class KnobRefused(UserError):
    """The journal refused to touch something kvds must leave alone (the root disk, a foreign kdamond)."""
