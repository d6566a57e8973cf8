"""The one error the sweep reports to people."""


class SweepError(Exception):
    """A problem the user can fix; printed as one line, exit code 2."""
