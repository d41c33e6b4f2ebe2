/// A compact JWS (RFC 7515) with a JSON header and payload. Only the
/// algorithms FIDO and Google use are accepted; `none` is refused.
package struct JWS {
    package let header: JSONValue
    /// The payload, parsed; `.null` when the JWS was read with `readPayload: false` (then
    /// ``readPayload()`` parses it, once the signature has been checked).
    package let payload: JSONValue
    /// The payload's bytes, decoded from base64url.
    package let payloadBytes: [UInt8]
    private let maxSize: Int
    package let signingInput: [UInt8]
    package let signature: [UInt8]
    package let algorithm: COSEAlgorithm

    package static let algorithms: [String: COSEAlgorithm] = [
        "RS256": .rs256, "RS384": .rs384, "RS512": .rs512, "PS256": .ps256, "PS384": .ps384, "PS512": .ps512,
        "ES256": .es256, "ES384": .es384, "ES512": .es512,
    ]

    /// Parses `compact`. `canonical`: each part must be unpadded base64url in the one encoding
    /// of its bytes (RFC 7515 §2), so that one token has one text: Sign in with Apple keys its
    /// notifications by the text, and the liberal decoder took a signature re-encoded with `+`
    /// and `/`, padding or other spare bits for a new notification (red team).
    /// `readPayload: false` leaves the payload unparsed: a BLOB's is parsed only after its
    /// signature verifies (red team, round 28: a forged, unsigned 32 MiB BLOB cost 10 s and
    /// 892 MB before its chain was looked at).
    package init(compact: [UInt8], maxSize: Int = 16 << 20, canonical: Bool = false, readPayload: Bool = true) throws(WebAuthnError) {
        guard compact.count <= maxSize else { throw WebAuthnError(.inputTooLarge, "the JWS is \(compact.count) bytes") }
        // The dots are counted before anything is split: splitting 32 MiB of dots made 33 million
        // slices, 1.2 GB, for one BLOB fetch (red team).
        var dots = 0
        for byte in compact where byte == UInt8(ascii: ".") { dots += 1 }
        guard dots == 2 else { throw WebAuthnError(.attestationStatementMalformed, "a JWS has three dot-separated parts; this one has \(dots + 1)") }
        let parts = compact.split(separator: UInt8(ascii: "."), maxSplits: 2, omittingEmptySubsequences: false)
        guard let headerBytes = parts[0].withUnsafeBufferPointer(Base64URL.decode(utf8:)),
            let payloadBytes = parts[1].withUnsafeBufferPointer(Base64URL.decode(utf8:)),
            let signature = parts[2].withUnsafeBufferPointer(Base64URL.decode(utf8:))
        else {
            throw WebAuthnError(.attestationStatementMalformed, "a JWS part is not base64url")
        }
        if canonical {
            for (part, bytes) in zip(parts, [headerBytes, payloadBytes, signature]) where !Base64URL.encode(bytes).utf8.elementsEqual(part) {
                throw WebAuthnError(.attestationStatementMalformed, "a JWS part is not in canonical base64url (no padding, no + or /, zero spare bits)")
            }
        }
        header = try JSONValue.parse(headerBytes, limits: JSONLimits(maxBytes: 1 << 20, maxDepth: 8))
        self.maxSize = maxSize
        self.payloadBytes = payloadBytes
        payload = readPayload ? try JSONValue.parse(payloadBytes, limits: JSONLimits(maxBytes: maxSize, maxDepth: 16)) : .null
        guard let name = header["alg"]?.stringValue else { throw WebAuthnError(.attestationStatementMalformed, "the JWS header has no alg") }
        // Matched by bytes: a dictionary lookup would also find canonically equivalent names.
        guard let algorithm = Self.algorithms.first(where: { Bytes.sameUTF8($0.key, name) })?.value else {
            throw WebAuthnError(.attestationStatementMalformed, "JWS alg \"\(name.prefix(16))\" is not accepted (none is never accepted)")
        }
        self.algorithm = algorithm
        self.signature = signature
        signingInput = Array(compact[0..<(parts[0].count + 1 + parts[1].count)])
    }

    /// Parses the payload (as the initializer does unless told not to).
    package func readPayload() throws(WebAuthnError) -> JSONValue {
        try JSONValue.parse(payloadBytes, limits: JSONLimits(maxBytes: maxSize, maxDepth: 16))
    }
}
