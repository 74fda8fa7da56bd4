"""Exceptions raised by distcheck."""


class GradcheckError(RuntimeError):
    """A gradient check failed: the derivatives are wrong (as ``torch.autograd.GradcheckError``).

    With ``raise_exception=False`` gradcheck returns False instead of raising it.
    """


class EngineCapabilityError(NotImplementedError):
    """The engine of the checked function cannot do what the requested check needs."""
