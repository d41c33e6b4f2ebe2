package import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The client data a browser collected and the authenticator signed over
/// (WebAuthn L3 §5.8.1), parsed from clientDataJSON.
package struct CollectedClientData: Sendable {
    /// `webauthn.create` or `webauthn.get`.
    package let type: String
    /// The challenge as it appears in the JSON (base64url).
    package let challenge: String
    package let origin: String
    package let crossOrigin: Bool?
    package let topOrigin: String?
    /// The raw bytes (what is hashed).
    package let bytes: [UInt8]

    /// Client data larger than this is refused.
    package static let maxSize = 64 * 1024

    /// Parses clientDataJSON (WebAuthn L3 §7.1 steps 5 and 6, §7.2 steps 8 and 9).
    package init(bytes: [UInt8]) throws(WebAuthnError) {
        guard bytes.count <= Self.maxSize else {
            throw WebAuthnError(.inputTooLarge, "clientDataJSON is \(bytes.count) bytes; the limit is \(Self.maxSize)")
        }
        let json: JSONValue
        do {
            json = try JSONValue.parse(bytes, limits: JSONLimits(maxBytes: Self.maxSize, maxDepth: 8))
        } catch {
            throw WebAuthnError(.clientDataMalformed, "clientDataJSON is not valid JSON: \(error.message)")
        }
        guard let object = json.objectValue else {
            throw WebAuthnError(.clientDataMalformed, "clientDataJSON is not a JSON object")
        }
        guard let type = object["type"]?.stringValue else {
            throw WebAuthnError(.clientDataMalformed, "clientDataJSON has no string member \"type\"")
        }
        guard let challenge = object["challenge"]?.stringValue else {
            throw WebAuthnError(.clientDataMalformed, "clientDataJSON has no string member \"challenge\"")
        }
        guard let origin = object["origin"]?.stringValue else {
            throw WebAuthnError(.clientDataMalformed, "clientDataJSON has no string member \"origin\"")
        }
        var crossOrigin: Bool?
        if let value = object["crossOrigin"], !value.isNull {
            guard let b = value.boolValue else {
                throw WebAuthnError(.clientDataMalformed, "clientDataJSON member \"crossOrigin\" is not a boolean")
            }
            crossOrigin = b
        }
        var topOrigin: String?
        if let value = object["topOrigin"], !value.isNull {
            guard let s = value.stringValue else {
                throw WebAuthnError(.clientDataMalformed, "clientDataJSON member \"topOrigin\" is not a string")
            }
            topOrigin = s
        }
        // tokenBinding is reserved in L3. When a Level 1/2 client sends it as
        // an object, its status must be one of the values those levels define.
        // Any other value is ignored: real clients have sent the string "unused"
        // (py_webauthn's fido-u2f vector), and L3 has no step that reads it.
        if let tokenBinding = object["tokenBinding"]?.objectValue {
            let status = tokenBinding["status"]?.stringValue
            guard let status, Bytes.sameUTF8(status, "present") || Bytes.sameUTF8(status, "supported") else {
                throw WebAuthnError(
                    .tokenBindingInvalid, "tokenBinding.status is \(status.map { "\"\($0)\"" } ?? "missing"); expected \"present\" or \"supported\"")
            }
        }
        self.type = type
        self.challenge = challenge
        self.origin = origin
        self.crossOrigin = crossOrigin
        self.topOrigin = topOrigin
        self.bytes = bytes
    }
}
