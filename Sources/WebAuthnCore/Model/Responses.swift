public import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The client's answer to a registration ceremony, decoded from
/// `RegistrationResponseJSON` (what `PublicKeyCredential.toJSON()` produces) or
/// from the FIDO conformance shape (no `rawId`, `getClientExtensionResults`).
public struct RegistrationResponse: Sendable {
    /// The credential ID the client reported (`id`, equal to `rawId` when both are present).
    public let id: [UInt8]
    /// `response.clientDataJSON`: the client data exactly as the client serialized it.
    public let clientDataJSON: [UInt8]
    /// `response.attestationObject`: the CBOR attestation object.
    public let attestationObject: [UInt8]
    /// `response.transports`, as reported by the client.
    public let transports: [AuthenticatorTransport]
    /// `authenticatorAttachment`, as reported by the client; nil when absent.
    public let authenticatorAttachment: AuthenticatorAttachment?
    /// `clientExtensionResults`; empty when absent.
    public let clientExtensionResults: ClientExtensions

    /// A response from its decoded parts. Each parameter sets the property of the same name.
    public init(
        id: [UInt8], clientDataJSON: [UInt8], attestationObject: [UInt8], transports: [AuthenticatorTransport] = [],
        authenticatorAttachment: AuthenticatorAttachment? = nil, clientExtensionResults: ClientExtensions = ClientExtensions()
    ) {
        self.id = id
        self.clientDataJSON = clientDataJSON
        self.attestationObject = attestationObject
        self.transports = transports
        self.authenticatorAttachment = authenticatorAttachment
        self.clientExtensionResults = clientExtensionResults
    }

    /// Decodes the JSON request body.
    public init(json bytes: [UInt8]) throws(WebAuthnError) {
        try self.init(json: JSONValue.parse(bytes, limits: JSONLimits()))
    }

    package init(json bytes: [UInt8], limits: JSONLimits) throws(WebAuthnError) {
        try self.init(json: JSONValue.parse(bytes, limits: limits))
    }

    package init(json: JSONValue) throws(WebAuthnError) {
        let common = try ResponseFields(json)
        let response = common.response
        id = common.id
        clientDataJSON = try ResponseFields.bytes(response, "clientDataJSON", in: "response", max: CollectedClientData.maxSize)
        attestationObject = try ResponseFields.bytes(response, "attestationObject", in: "response", max: CBORLimits().maxBytes)
        var transports: [AuthenticatorTransport] = []
        if let list = response["transports"], !list.isNull {
            guard let items = list.arrayValue, items.count <= 16 else {
                throw WebAuthnError(.responseMalformed, "response.transports is not an array of at most 16 strings")
            }
            for item in items {
                guard let t = item.stringValue, t.utf8.count <= 64 else {
                    throw WebAuthnError(.responseMalformed, "response.transports holds a value that is not a short string")
                }
                // Kept: a token of the spec's shape (1 to 32 lowercase ASCII letters, digits or
                // hyphens; every defined transport and any future one), once. Anything else is
                // ignored, as a client ignores a transport it does not know: it would be stored and
                // shown to whoever asks for the account's sign-in options (red team: markup, and a
                // comma that split into two entries when read back).
                let token =
                    t.utf8.count <= 32 && !t.isEmpty
                    && t.utf8.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D }
                if token && !transports.contains(where: { $0.rawValue == t }) { transports.append(AuthenticatorTransport(rawValue: t)) }
            }
        }
        self.transports = transports
        authenticatorAttachment = common.authenticatorAttachment
        clientExtensionResults = ClientExtensions(common.clientExtensionResults)
    }
}

/// The client's answer to an authentication ceremony, decoded from
/// `AuthenticationResponseJSON` or the FIDO conformance shape.
public struct AuthenticationResponse: Sendable {
    /// The credential ID the client reported (`id`, equal to `rawId` when both are present).
    public let id: [UInt8]
    /// `response.clientDataJSON`: the client data exactly as the client serialized it.
    public let clientDataJSON: [UInt8]
    /// `response.authenticatorData`: the bytes the signature covers, with the client data hash.
    public let authenticatorData: [UInt8]
    /// `response.signature`: the assertion signature, in the credential algorithm's encoding.
    public let signature: [UInt8]
    /// The user handle the authenticator returned; nil when absent, null or empty.
    public let userHandle: [UInt8]?
    /// `authenticatorAttachment`, as reported by the client; nil when absent.
    public let authenticatorAttachment: AuthenticatorAttachment?
    /// `clientExtensionResults`; empty when absent.
    public let clientExtensionResults: ClientExtensions

    /// A response from its decoded parts. Each parameter sets the property of the same name.
    public init(
        id: [UInt8], clientDataJSON: [UInt8], authenticatorData: [UInt8], signature: [UInt8],
        userHandle: [UInt8]? = nil, authenticatorAttachment: AuthenticatorAttachment? = nil,
        clientExtensionResults: ClientExtensions = ClientExtensions()
    ) {
        self.id = id
        self.clientDataJSON = clientDataJSON
        self.authenticatorData = authenticatorData
        self.signature = signature
        self.userHandle = userHandle
        self.authenticatorAttachment = authenticatorAttachment
        self.clientExtensionResults = clientExtensionResults
    }

    /// Decodes the JSON request body.
    ///
    /// - Throws: `json_malformed`, `input_too_large`, `response_malformed`,
    ///   `base64url_invalid`, `credential_type_invalid`, `credential_id_too_long`
    ///   or `credential_id_mismatch`.
    public init(json bytes: [UInt8]) throws(WebAuthnError) {
        try self.init(json: JSONValue.parse(bytes, limits: JSONLimits()))
    }

    package init(json bytes: [UInt8], limits: JSONLimits) throws(WebAuthnError) {
        try self.init(json: JSONValue.parse(bytes, limits: limits))
    }

    package init(json: JSONValue) throws(WebAuthnError) {
        let common = try ResponseFields(json)
        let response = common.response
        id = common.id
        clientDataJSON = try ResponseFields.bytes(response, "clientDataJSON", in: "response", max: CollectedClientData.maxSize)
        authenticatorData = try ResponseFields.bytes(response, "authenticatorData", in: "response", max: CBORLimits().maxBytes)
        signature = try ResponseFields.bytes(response, "signature", in: "response", max: 8192)
        if let handle = response["userHandle"], !handle.isNull {
            let bytes = try ResponseFields.bytes(response, "userHandle", in: "response", max: 64)
            userHandle = bytes.isEmpty ? nil : bytes
        } else {
            userHandle = nil
        }
        authenticatorAttachment = common.authenticatorAttachment
        clientExtensionResults = ClientExtensions(common.clientExtensionResults)
    }
}

/// The members both response shapes share.
struct ResponseFields {
    let id: [UInt8]
    let response: JSONObject
    let authenticatorAttachment: AuthenticatorAttachment?
    let clientExtensionResults: JSONObject

    init(_ json: JSONValue) throws(WebAuthnError) {
        guard let top = json.objectValue else {
            throw WebAuthnError(.responseMalformed, "the credential is not a JSON object")
        }
        guard let type = top["type"]?.stringValue else {
            throw WebAuthnError(.responseMalformed, "the credential has no string member \"type\"")
        }
        guard Bytes.sameUTF8(type, "public-key") else {
            throw WebAuthnError(.credentialTypeInvalid, "credential type is \"\(type)\"; expected \"public-key\"")
        }
        let id = try Self.bytes(top, "id", in: "credential", max: AuthenticatorData.Layout.maxCredentialIdLength + 1)
        guard !id.isEmpty else { throw WebAuthnError(.responseMalformed, "credential id is empty") }
        guard id.count <= AuthenticatorData.Layout.maxCredentialIdLength else {
            throw WebAuthnError(.credentialIdTooLong, "credential id is \(id.count) bytes; at most 1023 are allowed")
        }
        if let raw = top["rawId"], !raw.isNull {
            let rawId = try Self.bytes(top, "rawId", in: "credential", max: AuthenticatorData.Layout.maxCredentialIdLength + 1)
            guard rawId == id else {
                throw WebAuthnError(.credentialIdMismatch, "rawId (\(Base64URL.encode(rawId))) differs from id (\(Base64URL.encode(id)))")
            }
        }
        guard let response = top["response"]?.objectValue else {
            throw WebAuthnError(.responseMalformed, "the credential has no object member \"response\"")
        }
        var attachment: AuthenticatorAttachment?
        if let a = top["authenticatorAttachment"], !a.isNull {
            guard let s = a.stringValue else { throw WebAuthnError(.responseMalformed, "authenticatorAttachment is not a string") }
            attachment = AuthenticatorAttachment(rawValue: s)
        }
        var extensions = JSONObject()
        for key in ["clientExtensionResults", "getClientExtensionResults"] {
            if let e = top[key], !e.isNull {
                guard let object = e.objectValue else { throw WebAuthnError(.responseMalformed, "\(key) is not an object") }
                extensions = object
            }
        }
        self.id = id
        self.response = response
        self.authenticatorAttachment = attachment
        self.clientExtensionResults = extensions
    }

    /// A required base64url member, decoded.
    static func bytes(_ object: JSONObject, _ key: String, in container: String, max: Int) throws(WebAuthnError) -> [UInt8] {
        guard let value = object[key] else {
            throw WebAuthnError(.responseMalformed, "\(container) has no member \"\(key)\"")
        }
        guard var text = value.stringValue else {
            throw WebAuthnError(.responseMalformed, "\(container).\(key) is not a string")
        }
        guard text.utf8.count <= (max * 4 + 2) / 3 + 2 else {
            throw WebAuthnError(.inputTooLarge, "\(container).\(key) is longer than \(max) bytes")
        }
        guard let bytes = text.withUTF8({ Base64URL.decode(utf8: $0) }) else {
            throw WebAuthnError(.base64urlInvalid, "\(container).\(key) is not base64url")
        }
        // The length check above bounds the work; this one is exact (red team, sixteenth pass:
        // 65- and 66-byte user handles passed a limit of 64).
        guard bytes.count <= max else {
            throw WebAuthnError(.inputTooLarge, "\(container).\(key) is longer than \(max) bytes")
        }
        return bytes
    }
}
