internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The attestation object (WebAuthn L3 §6.5.4): `fmt`, `authData` and `attStmt`.
package struct AttestationObject: Sendable {
    package let format: AttestationFormat
    package let authenticatorData: AuthenticatorData
    /// The format-specific attestation statement (a CBOR map).
    package let statement: CBOR

    /// Decodes an attestation object (WebAuthn L3 §7.1 step 13).
    package init(bytes: [UInt8], limits: CBORLimits = CBORLimits()) throws(WebAuthnError) {
        let item = try CBORDecoder.decode(bytes, limits: limits)
        guard case .map(let pairs) = item else {
            throw WebAuthnError(.attestationObjectMalformed, "the attestation object is not a CBOR map")
        }
        for p in pairs {
            guard let key = p.key.textValue, ["fmt", "authData", "attStmt"].contains(where: { Bytes.sameUTF8($0, key) }) else {
                throw WebAuthnError(.attestationObjectMalformed, "unexpected attestation object member \(p.key.keyDescription)")
            }
        }
        guard let fmt = item["fmt"]?.textValue else {
            throw WebAuthnError(.attestationObjectMalformed, "fmt is missing or not a text string")
        }
        guard let authData = item["authData"]?.bytesValue else {
            throw WebAuthnError(.attestationObjectMalformed, "authData is missing or not a byte string")
        }
        // attStmt is a map; only the compound format (L3 §8.9) makes it an array.
        guard let attStmt = item["attStmt"],
            attStmt.mapValue != nil || (AttestationFormat(rawValue: fmt) == CompoundAttestation.identifier && attStmt.arrayValue != nil)
        else {
            throw WebAuthnError(.attestationObjectMalformed, "attStmt is missing or not a map")
        }
        format = AttestationFormat(rawValue: fmt)
        statement = attStmt
        authenticatorData = try AuthenticatorData(bytes: authData, limits: limits)
    }
}
