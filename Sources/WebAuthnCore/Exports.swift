// `WebAuthnError` (the one error type) and `COSEAlgorithm` are declared below the
// engine, in _WebAuthnEncoding, because the parsers and the crypto layer throw and use
// them too. Re-exporting the module makes exactly those two public types part of
// WebAuthnCore: everything else in _WebAuthnEncoding is `package` and stays invisible.
@_exported public import _WebAuthnEncoding
