"""A trial's outcome as people read it, and whether it uses the study's budget."""


def outcome(t):
    """A trial's status for people: complete, pruned, failed, interrupted, surplus, running, waiting."""
    state = t.state.name.lower()
    if state == "fail":
        return t.user_attrs.get("outcome", "failed")
    return state


def counts(t):
    """Whether a trial uses the budget: everything but the interrupted (queued again) and surplus ones."""
    return outcome(t) not in ("interrupted", "surplus")
