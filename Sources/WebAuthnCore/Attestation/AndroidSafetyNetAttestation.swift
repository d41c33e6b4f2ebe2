internal import Foundation
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The `android-safetynet` attestation statement format (WebAuthn L3 §8.5).
/// SafetyNet is deprecated by Google, but devices still produce it.
enum AndroidSafetyNetAttestation: AttestationFormatVerifier {
    static let identifier = AttestationFormat.androidSafetyNet
    static let step = "WebAuthn L3 §8.5"
    static let hostname = "attest.android.com"
    /// The largest JWS accepted.
    static let maxResponseSize = 64 * 1024
    /// Tolerated clock skew for a timestamp from the future.
    static let futureSkew: Double = 60

    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> AttestationVerification {
        // Step 1: ver and response.
        guard let ver = input.statement["ver"]?.textValue, !ver.isEmpty,
            let response = input.statement["response"]?.bytesValue, !response.isEmpty
        else {
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
            throw WebAuthnError(
                .attestationCertificateInvalid, "the SafetyNet signing certificate is not issued to \(hostname); subject is \(leaf.subjectSummary)",
                step: step + " step 4")
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
            throw WebAuthnError(
                .attestationIntegrityFailed, "the SafetyNet ctsProfileMatch is not true (AttestationPolicy.requireSafetyNetCTSProfileMatch)", step: step)
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
            throw WebAuthnError(
                .attestationTimestampInvalid,
                "the SafetyNet timestampMs \(timestamp) is not within \(maxAge) s before the engine's time (\(nowMs.rounded()) ms), with \(futureSkew) s of skew",
                step: step)
        }
    }
}
