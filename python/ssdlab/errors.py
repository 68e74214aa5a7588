"""The exceptions ssdlab raises, named once for Python.

They are declared in Rust (``crates/ssdlab-py``), where every core error is mapped to one of them
in a single place; this module only re-exports them so that Python code and users import them from
``ssdlab`` (or ``ssdlab.errors``) and never from the private ``ssdlab._core``.

- :class:`SsdlabError` -- the base class of everything below.
- :class:`ConfigError` -- a bad configuration key or value, an unknown preset, a bad ``--set``.
- :class:`WorkloadError` -- a fio job file or trace the simulator cannot use; the message names
  ``file:line``.
- :class:`DeviceError` -- a request the device refuses, e.g. an offset past its end, device full.
- :class:`NandRuleError` -- a :class:`DeviceError`: a native flash call broke a NAND rule (a
  page programmed twice or out of order, an erase past the endurance); names address and rule.
"""

from ssdlab._core import ConfigError, DeviceError, NandRuleError, SsdlabError, WorkloadError

__all__ = ["ConfigError", "DeviceError", "NandRuleError", "SsdlabError", "WorkloadError"]
