public import WebAuthnCore
package import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// Client data as plain values; `bytes` is the JSON a browser would send.
public struct ClientDataParts: Sendable {
    /// `type`: `webauthn.create` or `webauthn.get` (any text, to test a wrong one).
    public var type: String
    /// The challenge, encoded as base64url in `challenge`.
    public var challenge: [UInt8]
    /// `origin`, such as `https://example.com`.
    public var origin: String
    /// `crossOrigin`; nil leaves the member out. Default false.
    public var crossOrigin: Bool? = false
    /// `topOrigin`; nil leaves the member out.
    public var topOrigin: String?
    /// Extra members, appended as given (to test unknown or duplicate members).
    public var extraJSON: String = ""
    /// The `challenge` member as given, instead of the base64url of ``challenge`` (to test
    /// other encodings of the same bytes: padded, the standard alphabet, spare bits set).
    public var challengeText: String?

    /// Client data with `crossOrigin: false`, no `topOrigin` and no extra members.
    public init(type: String, challenge: [UInt8], origin: String) {
        self.type = type
        self.challenge = challenge
        self.origin = origin
    }

    /// The clientDataJSON bytes: `type`, `challenge`, `origin`, then `crossOrigin`,
    /// `topOrigin` when set, then ``extraJSON``.
    public var bytes: [UInt8] {
        var o: JSONObject = ["type": .string(type), "challenge": .string(challengeText ?? Base64URL.encode(challenge)), "origin": .string(origin)]
        if let crossOrigin { o["crossOrigin"] = .bool(crossOrigin) }
        if let topOrigin { o["topOrigin"] = .string(topOrigin) }
        var text = JSONValue.object(o).serialized()
        if !extraJSON.isEmpty { text.removeLast(); text += "," + extraJSON + "}" }
        return Array(text.utf8)
    }
}

/// Authenticator data as plain values (WebAuthn L3 §6.1).
public struct AuthenticatorDataParts: Sendable {
    /// Attested credential data as plain values (WebAuthn L3 §6.5.2).
    public struct Attested: Sendable {
        /// The AAGUID bytes (16 for a well-formed response).
        public var aaguid: [UInt8]
        /// The credential ID; its length is encoded in two bytes before it.
        public var credentialId: [UInt8]
        package var publicKey: CBOR
    }

    /// SHA-256 of the RP ID (32 bytes; set other bytes to test a mismatch).
    public var rpIdHash: [UInt8]
    /// The flags byte; ED is added when there are extensions.
    public var flags: AuthenticatorFlags
    /// The signature counter.
    public var signCount: UInt32
    /// The attested credential data (registration); nil for an assertion.
    public var attested: Attested?
    package var extensions: CBOR?
    /// Bytes appended after everything (to test trailing data).
    public var trailing: [UInt8] = []

    /// Authenticator data for `rpId` (hashed with SHA-256), with no extensions and no trailing bytes.
    public init(rpId: String, flags: AuthenticatorFlags, signCount: UInt32, attested: Attested?) {
        self.rpIdHash = Digest.sha256(Array(rpId.utf8))
        self.flags = flags
        self.signCount = signCount
        self.attested = attested
    }

    /// The encoded authenticator data (WebAuthn L3 §6.1), with ``trailing`` appended.
    public var bytes: [UInt8] {
        var out = rpIdHash
        var f = flags
        if extensions != nil { f.insert(.extensionData) }
        out.append(f.rawValue)
        out += [UInt8(signCount >> 24 & 0xff), UInt8(signCount >> 16 & 0xff), UInt8(signCount >> 8 & 0xff), UInt8(signCount & 0xff)]
        if let a = attested {
            out += a.aaguid
            out += [UInt8(a.credentialId.count >> 8 & 0xff), UInt8(a.credentialId.count & 0xff)]
            out += a.credentialId
            out += CBOREncoder.encode(a.publicKey)
        }
        if let extensions { out += CBOREncoder.encode(extensions) }
        return out + trailing
    }
}

/// A registration response as plain values.
public struct RegistrationParts: Sendable {
    /// The credential ID (`id` and `rawId`).
    public var id: [UInt8]
    /// The client data.
    public var clientData: ClientDataParts
    /// The authenticator data inside the attestation object.
    public var authenticatorData: AuthenticatorDataParts
    /// `fmt` of the attestation object.
    public var format: AttestationFormat
    package var statement: CBOR
    /// `response.transports`.
    public var transports: [AuthenticatorTransport]
    /// `authenticatorAttachment` of the JSON; nil leaves it out.
    public var attachment: AuthenticatorAttachment?
    /// `clientExtensionResults` (such as `{"credProps": {"rk": true}}`); empty by default.
    public var clientExtensionResults = ClientExtensions()
    /// Replaces the encoded attestation object when set (to test malformed CBOR).
    public var attestationObjectOverride: [UInt8]?
    /// Replaces the clientDataJSON bytes when set.
    public var clientDataOverride: [UInt8]?

    /// The clientDataJSON bytes: ``clientDataOverride``, or the encoded ``clientData``.
    public var clientDataJSON: [UInt8] { clientDataOverride ?? clientData.bytes }

    /// The CBOR attestation object (`fmt`, `attStmt`, `authData`), or ``attestationObjectOverride``.
    public var attestationObject: [UInt8] {
        attestationObjectOverride
            ?? CBOREncoder.encode(
                .map([
                    CBORPair(.text("fmt"), .text(format.rawValue)),
                    CBORPair(.text("attStmt"), statement),
                    CBORPair(.text("authData"), .bytes(authenticatorData.bytes)),
                ]))
    }

    /// The `RegistrationResponseJSON` a browser's `toJSON()` gives.
    package var json: JSONValue {
        var response: JSONObject = [
            "clientDataJSON": .string(Base64URL.encode(clientDataJSON)),
            "attestationObject": .string(Base64URL.encode(attestationObject)),
            "transports": .array(transports.map { .string($0.rawValue) }),
        ]
        response["authenticatorData"] = .string(Base64URL.encode(authenticatorData.bytes))
        var o: JSONObject = [
            "id": .string(Base64URL.encode(id)), "rawId": .string(Base64URL.encode(id)), "type": "public-key",
            "response": .object(response), "clientExtensionResults": .object(clientExtensionResults.object),
        ]
        if let attachment { o["authenticatorAttachment"] = .string(attachment.rawValue) }
        return .object(o)
    }

    /// The `RegistrationResponseJSON` a browser's `toJSON()` gives, as bytes.
    public var jsonBytes: [UInt8] { json.serializedBytes() }

    /// The response as the FIDO2 conformance API posts it (ServerAuthenticatorAttestationResponse).
    package var conformanceJSON: JSONValue { ConformanceShape.from(json) }

    /// The decoded response, as the engine's `finishRegistration` takes it.
    public var response: RegistrationResponse {
        RegistrationResponse(
            id: id, clientDataJSON: clientDataJSON, attestationObject: attestationObject, transports: transports, authenticatorAttachment: attachment,
            clientExtensionResults: clientExtensionResults)
    }
}

/// An authentication response as plain values.
public struct AssertionParts: Sendable {
    /// The credential ID (`id` and `rawId`).
    public var id: [UInt8]
    /// The client data.
    public var clientData: ClientDataParts
    /// The authenticator data the signature covers.
    public var authenticatorData: AuthenticatorDataParts
    /// The assertion signature over the authenticator data and the client data hash.
    public var signature: [UInt8]
    /// `response.userHandle`; nil sends JSON null.
    public var userHandle: [UInt8]?
    /// `authenticatorAttachment` of the JSON; nil leaves it out.
    public var attachment: AuthenticatorAttachment?
    /// `clientExtensionResults` (such as `{"appid": true}`); empty by default.
    public var clientExtensionResults = ClientExtensions()
    /// Replaces the clientDataJSON bytes when set.
    public var clientDataOverride: [UInt8]?

    /// The clientDataJSON bytes: ``clientDataOverride``, or the encoded ``clientData``.
    public var clientDataJSON: [UInt8] { clientDataOverride ?? clientData.bytes }

    package var json: JSONValue {
        var response: JSONObject = [
            "clientDataJSON": .string(Base64URL.encode(clientDataJSON)),
            "authenticatorData": .string(Base64URL.encode(authenticatorData.bytes)),
            "signature": .string(Base64URL.encode(signature)),
        ]
        response["userHandle"] = userHandle.map { .string(Base64URL.encode($0)) } ?? .null
        var o: JSONObject = [
            "id": .string(Base64URL.encode(id)), "rawId": .string(Base64URL.encode(id)), "type": "public-key",
            "response": .object(response), "clientExtensionResults": .object(clientExtensionResults.object),
        ]
        if let attachment { o["authenticatorAttachment"] = .string(attachment.rawValue) }
        return .object(o)
    }

    /// The `AuthenticationResponseJSON` a browser's `toJSON()` gives, as bytes.
    public var jsonBytes: [UInt8] { json.serializedBytes() }

    /// The response as the FIDO2 conformance API posts it (ServerAuthenticatorAssertionResponse).
    package var conformanceJSON: JSONValue { ConformanceShape.from(json) }

    /// The decoded response, as the engine's `finishAuthentication` takes it
    /// (without the attachment and extension results).
    public var response: AuthenticationResponse {
        AuthenticationResponse(
            id: id, clientDataJSON: clientDataJSON, authenticatorData: authenticatorData.bytes,
            signature: signature, userHandle: userHandle)
    }
}

/// The FIDO2 conformance API's credential shape: the browser's `toJSON()` without
/// `rawId`, and `getClientExtensionResults` for `clientExtensionResults`.
enum ConformanceShape {
    static func from(_ json: JSONValue) -> JSONValue {
        guard var object = json.objectValue else { return json }
        object["rawId"] = nil
        object["getClientExtensionResults"] = object["clientExtensionResults"] ?? [:]
        object["clientExtensionResults"] = nil
        return .object(object)
    }
}
