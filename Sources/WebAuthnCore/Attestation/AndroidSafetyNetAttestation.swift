import Foundation

/// The `android-safetynet` attestation statement format (WebAuthn L3 §8.5).
/// SafetyNet is deprecated by Google, but devices still produce it.
enum AndroidSafetyNetAttestation: AttestationFormatVerifier {
    static let identifier = "android-safetynet"
    static let step = "WebAuthn L3 §8.5"
    static let hostname = "attest.android.com"
    /// The largest JWS accepted.
    static let maxResponseSize = 64 * 1024
    /// Tolerated clock skew for a timestamp from the future.
    static let futureSkew: Double = 60

    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> AttestationVerification {
        // Step 1: ver and response.
        guard let ver = input.statement["ver"]?.textValue, !ver.isEmpty,
              let response = input.statement["response"]?.bytesValue, !response.isEmpty else {
            throw WebAuthnError(.attestationStatementMalformed, "android-safetynet attStmt needs a non-empty ver and response", step: step + " step 1")
        }
        guard response.count <= maxResponseSize else {
            throw WebAuthnError(.inputTooLarge, "the SafetyNet response is \(response.count) bytes; the limit is \(maxResponseSize)", step: step)
        }
        // Step 2: a valid SafetyNet response (a JWS signed by attest.android.com).
        let jws = try JWS(compact: response)
        guard let x5c = jws.header["x5c"]?.arrayValue, !x5c.isEmpty, x5c.count <= 8 else {
            throw WebAuthnError(.attestationStatementMalformed, "the SafetyNet JWS header needs x5c with 1 to 8 certificates", step: step + " step 2")
        }
        var certificates: [X509Certificate] = []
        for item in x5c {
            guard let text = item.stringValue, let der = Data(base64Encoded: text) else {
                throw WebAuthnError(.attestationStatementMalformed, "a SafetyNet x5c entry is not base64 DER", step: step)
            }
            certificates.append(try X509Certificate(der: [UInt8](der)))
        }
        let leaf = certificates[0]
        guard leaf.matchesHost(hostname) else {
            throw WebAuthnError(.attestationCertificateInvalid, "the SafetyNet signing certificate is not issued to \(hostname); subject is \(leaf.subjectSummary)", step: step + " step 4")
        }
        try jws.verifySignature(with: leaf.publicKey())
        // Step 3: nonce = base64(SHA-256(authenticatorData ‖ clientDataHash)).
        let expected = Digest.hash(.sha256, parts: input.signedData)
        guard let nonceText = jws.payload["nonce"]?.stringValue, let nonce = Data(base64Encoded: nonceText), [UInt8](nonce) == expected else {
            throw WebAuthnError(.attestationNonceMismatch, "the SafetyNet nonce is not base64(SHA-256(authData ‖ clientDataHash))", step: step + " step 3")
        }
        try verifyFreshness(jws.payload, now: input.now, maxAge: input.policy.attestation.safetyNetMaxAge)
        // The device passed Google's compatibility check, when the policy requires it.
        if input.policy.attestation.requireSafetyNetCTSProfileMatch && jws.payload["ctsProfileMatch"]?.boolValue != true {
            throw WebAuthnError(.attestationIntegrityFailed, "the SafetyNet ctsProfileMatch is not true (AttestationPolicy.requireSafetyNetCTSProfileMatch)", step: step)
        }
        // Step 5: Basic, trust path x5c.
        return AttestationVerification(type: .basic, trustPath: certificates)
    }

    /// Freshness, by the engine's clock: `timestampMs` is an integer number of
    /// milliseconds (read with a checked conversion: 1e300 is not one), at most
    /// `maxAge` seconds old and at most `futureSkew` ahead.
    static func verifyFreshness(_ payload: JSONValue, now: Date, maxAge: Double) throws(WebAuthnError) {
        guard let number = payload["timestampMs"]?.numberValue else {
            throw WebAuthnError(.attestationStatementMalformed, "the SafetyNet payload has no timestampMs", step: step)
        }
        guard let timestamp = Int64(exactly: number), timestamp >= 0 else {
            throw WebAuthnError(.attestationTimestampInvalid, "the SafetyNet timestampMs is not a non-negative integer of milliseconds", step: step)
        }
        let nowMs = now.timeIntervalSince1970 * 1000
        let age = nowMs - Double(timestamp)
        guard age >= -futureSkew * 1000, age <= maxAge * 1000 else {
            throw WebAuthnError(.attestationTimestampInvalid, "the SafetyNet timestampMs \(timestamp) is not within \(maxAge) s before the engine's time (\(nowMs.rounded()) ms), with \(futureSkew) s of skew", step: step)
        }
    }
}

/// A compact JWS (RFC 7515) with a JSON header and payload. Only the
/// algorithms FIDO and Google use are accepted; `none` is refused.
struct JWS {
    let header: JSONValue
    let payload: JSONValue
    let signingInput: [UInt8]
    let signature: [UInt8]
    let algorithm: COSEAlgorithm

    static let algorithms: [String: COSEAlgorithm] = [
        "RS256": .rs256, "RS384": .rs384, "RS512": .rs512, "PS256": .ps256, "PS384": .ps384, "PS512": .ps512,
        "ES256": .es256, "ES384": .es384, "ES512": .es512,
    ]

    init(compact: [UInt8], maxSize: Int = 16 << 20) throws(WebAuthnError) {
        guard compact.count <= maxSize else { throw WebAuthnError(.inputTooLarge, "the JWS is \(compact.count) bytes") }
        let parts = compact.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw WebAuthnError(.attestationStatementMalformed, "a JWS has three dot-separated parts; this one has \(parts.count)") }
        guard let headerBytes = parts[0].withUnsafeBufferPointer(Base64URL.decode(utf8:)),
              let payloadBytes = parts[1].withUnsafeBufferPointer(Base64URL.decode(utf8:)),
              let signature = parts[2].withUnsafeBufferPointer(Base64URL.decode(utf8:)) else {
            throw WebAuthnError(.attestationStatementMalformed, "a JWS part is not base64url")
        }
        header = try JSONValue.parse(headerBytes, limits: JSONLimits(maxBytes: 1 << 20, maxDepth: 8))
        payload = try JSONValue.parse(payloadBytes, limits: JSONLimits(maxBytes: maxSize, maxDepth: 16))
        guard let name = header["alg"]?.stringValue else { throw WebAuthnError(.attestationStatementMalformed, "the JWS header has no alg") }
        // Matched by bytes: a dictionary lookup would also find canonically equivalent names.
        guard let algorithm = Self.algorithms.first(where: { Bytes.sameUTF8($0.key, name) })?.value else {
            throw WebAuthnError(.attestationStatementMalformed, "JWS alg \"\(name.prefix(16))\" is not accepted (none is never accepted)")
        }
        self.algorithm = algorithm
        self.signature = signature
        signingInput = Array(compact[0..<(parts[0].count + 1 + parts[1].count)])
    }

    /// The size of r ‖ s for each ECDSA algorithm (RFC 7518 §3.4): twice the curve's coordinate size.
    static let ecdsaSignatureSizes: [COSEAlgorithm: Int] = [.es256: 64, .es384: 96, .es512: 132]

    /// Verifies the signature; ECDSA signatures in JWS are raw r ‖ s and are converted to DER.
    func verifySignature(with key: PublicKey) throws(WebAuthnError) {
        var sig = signature
        if let size = Self.ecdsaSignatureSizes[algorithm] {
            guard sig.count == size else {
                throw WebAuthnError(.attestationSignatureInvalid, "the JWS \(algorithm.name) signature is \(sig.count) bytes; r ‖ s is \(size)")
            }
            sig = Self.derSignature(r: Array(sig[..<(size / 2)]), s: Array(sig[(size / 2)...]))
        }
        guard key.verify(signature: sig, parts: [signingInput], algorithm: algorithm) else {
            throw WebAuthnError(.attestationSignatureInvalid, "the JWS signature does not verify with its x5c[0] key (\(algorithm))")
        }
    }

    /// ECDSA-Sig-Value ::= SEQUENCE { r INTEGER, s INTEGER } from fixed-size r and s
    /// (any size: DER lengths are written in as many bytes as they need).
    static func derSignature(r: [UInt8], s: [UInt8]) -> [UInt8] {
        func integer(_ v: [UInt8]) -> [UInt8] {
            var bytes = Array(v.drop { $0 == 0 })
            if bytes.isEmpty || bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
            return [0x02] + DER.encodeLength(bytes.count) + bytes
        }
        let body = integer(r) + integer(s)
        return [0x30] + DER.encodeLength(body.count) + body
    }
}
