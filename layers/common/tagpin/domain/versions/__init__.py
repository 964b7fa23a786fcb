"""Version channels: follow the newest version a policy allows instead of one floating tag's digest.

Pure domain code (no I/O): a ``VersionPolicy`` says which tags are versions and which of them a
channel may move to; ``select_head`` chooses the head among the tags of a repository and says why
each newer tag was rejected; ``move`` tells an upgrade from a downgrade, so that a head never goes
backwards by accident. One module per concept:

* ``tags``: reading a tag as a version of a kind (semver, numeric, calver, lexical), and the edge
  cases (``v`` prefix, leading zeros, build metadata, cosign tags, ...);
* ``ranges``: npm-style semver ranges (``semantic_version.NpmSpec``, and why that library);
* ``policy``: ``VersionPolicy``, its compact form (``semver:~1.4``) and the ``Reason`` enum;
* ``selection``: ``select_head``, ``Selection``, ``move``, ``VersionSet`` (versions marked bad, or
  verified, whatever their spelling).

The public names are importable from this package.
"""

from __future__ import annotations

from tagpin.domain.versions.policy import InvalidPolicy, Order, PolicyKind, Reason, VersionPolicy
from tagpin.domain.versions.ranges import InvalidRange, SemverRange
from tagpin.domain.versions.selection import Rejection, Selection, Step, VersionSet, move, select_head
from tagpin.domain.versions.tags import MAX_TAG_LENGTH, Version

__all__ = [
    "MAX_TAG_LENGTH",
    "InvalidPolicy",
    "InvalidRange",
    "Order",
    "PolicyKind",
    "Reason",
    "Rejection",
    "Selection",
    "SemverRange",
    "Step",
    "Version",
    "VersionPolicy",
    "VersionSet",
    "move",
    "select_head",
]
