"""Signature verification over a registry (``tagpin.ports.signatures.SignatureChecker``): cosign's
``.sig`` tags and Sigstore bundles attached as OCI 1.1 referrers, key-based (``cryptography``) and
keyless (``sigstore``, offline). ``checker`` says how the verdict is reached.

Only the consumer verifies: this package, cryptography and sigstore ship in its layer
(layers/kubernetes), never in the webhook's or the poller's (the import contracts in pyproject.toml).
"""

from tagpin.adapters.signatures.checker import RegistrySignatureChecker
from tagpin.adapters.signatures.reading import SignatureLimits

__all__ = ["RegistrySignatureChecker", "SignatureLimits"]
