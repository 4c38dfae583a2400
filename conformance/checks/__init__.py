"""Every registered check (importing this package registers them all)."""

from knowspec.conformance.checks.registry import CHECKS, CheckContext, CheckSpec, check, skip
# import order is run order: listing first, the costly differential checks last
from knowspec.conformance.checks import listing, inputs, outputs, leakage, differential, rest  # noqa: F401,I001
from knowspec.conformance.checks import docpool_import  # noqa: F401,I001
from knowspec.conformance.checks import cancellation  # noqa: F401,I001
from knowspec.conformance.checks import protocol_lines, validation_blocking  # noqa: F401,I001
from knowspec.conformance.checks import apply_isolation  # noqa: F401,I001
from knowspec.conformance.checks import okf_oracles  # noqa: F401,I001
from knowspec.conformance.checks import okf_cards  # noqa: F401,I001
from knowspec.conformance.checks import okf_write_oracles  # noqa: F401,I001
from knowspec.conformance.checks import pool_oracles  # noqa: F401,I001
from knowspec.conformance.checks import pool_defaults  # noqa: F401,I001
from knowspec.conformance.checks import pool_fulltext  # noqa: F401,I001
from knowspec.conformance.checks import pool_hybrid  # noqa: F401,I001

__all__ = ["CHECKS", "CheckContext", "CheckSpec", "check", "skip"]
