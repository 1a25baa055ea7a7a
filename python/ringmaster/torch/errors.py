"""Exceptions of ringmaster.torch's elastic loop."""


class HostsUpdatedInterrupt(Exception):
    """Raised by ``check_host_updates()`` / ``commit()`` at a step boundary
    when the membership changed; ``@elastic.run`` catches it, re-forms the
    process group and calls the training function again. ``rolled_back``:
    the state must return to the last commit (a failure generation came)."""

    def __init__(self, rolled_back: bool = False):
        super().__init__("membership changed")
        self.rolled_back = rolled_back


class CollectiveError(RuntimeError):
    """A collective through the shim failed (a peer died or the communicator
    was revoked); ``@elastic.run`` recovers: rollback to the last commit,
    new generation, sync."""


class WorkerRemoved(Exception):
    """This worker is no longer a member (shrunk away or declared failed):
    ``@elastic.run`` returns None."""
