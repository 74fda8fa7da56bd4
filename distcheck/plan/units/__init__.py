"""Work units: small, picklable descriptions of independent pieces of a check.

A unit names a variant of the check's subject and a slice of work (a range of Jacobian
columns, a range of rows, a projection, one auxiliary check). ``run`` computes it against the
subject with the engine and returns plain data (numpy arrays, floats, flags); :func:`execute`
wraps that into a :class:`UnitResult`, capturing exceptions so that the reducer can raise them
in the reference's order whatever order the units finished in.
"""

from distcheck.plan.units.analytical import AnalyticalRows, ForwardColumns
from distcheck.plan.units.auxiliary import AuxiliaryCheck
from distcheck.plan.units.base import UnitResult, execute
from distcheck.plan.units.numerical import NumericalColumns, NumericalProjection
from distcheck.plan.units.results import ColumnsResult, RowsResult
from distcheck.plan.units.slots import InputSlot, OutputSlot

Unit = NumericalColumns | NumericalProjection | AnalyticalRows | ForwardColumns | AuxiliaryCheck

__all__ = [
    "AnalyticalRows",
    "AuxiliaryCheck",
    "ColumnsResult",
    "ForwardColumns",
    "InputSlot",
    "NumericalColumns",
    "NumericalProjection",
    "OutputSlot",
    "RowsResult",
    "Unit",
    "UnitResult",
    "execute",
]
