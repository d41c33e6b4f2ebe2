public import WebAuthnCore
package import _WebAuthnEncoding
package import _WebAuthnCrypto

/// Client data as plain values; `bytes` is the JSON a browser would send.
public struct ClientDataParts: Sendable {
    public var type: String
    public var challenge: [UInt8]
    public var origin: String
    public var crossOrigin: Bool? = false
    public var topOrigin: String?
    /// Extra members, appended as given (to test unknown or duplicate members).
    public var extraJSON: String = ""

    public init(type: String, challenge: [UInt8], origin: String) {
        self.type = type
        self.challenge = challenge
        self.origin = origin
    }

    public var bytes: [UInt8] {
        var o: JSONObject = ["type": .string(type), "challenge": .string(Base64URL.encode(challenge)), "origin": .string(origin)]
        if let crossOrigin { o["crossOrigin"] = .bool(crossOrigin) }
        if let topOrigin { o["topOrigin"] = .string(topOrigin) }
        var text = JSONValue.object(o).serialized()
        if !extraJSON.isEmpty { text.removeLast(); text += "," + extraJSON + "}" }
        return Array(text.utf8)
    }
}

/// Authenticator data as plain values (WebAuthn L3 §6.1).
public struct AuthenticatorDataParts: Sendable {
    public struct Attested: Sendable {
        public var aaguid: [UInt8]
        public var credentialId: [UInt8]
        package var publicKey: CBOR
    }

    public var rpIdHash: [UInt8]
    public var flags: AuthenticatorFlags
    public var signCount: UInt32
    public var attested: Attested?
    package var extensions: CBOR?
    /// Bytes appended after everything (to test trailing data).
    public var trailing: [UInt8] = []

    public init(rpId: String, flags: AuthenticatorFlags, signCount: UInt32, attested: Attested?) {
        self.rpIdHash = Digest.sha256(Array(rpId.utf8))
        self.flags = flags
        self.signCount = signCount
        self.attested = attested
    }

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
    public var id: [UInt8]
    public var clientData: ClientDataParts
    public var authenticatorData: AuthenticatorDataParts
    public var format: AttestationFormat
    package var statement: CBOR
    public var transports: [AuthenticatorTransport]
    public var attachment: AuthenticatorAttachment?
    /// Replaces the encoded attestation object when set (to test malformed CBOR).
    public var attestationObjectOverride: [UInt8]?
    /// Replaces the clientDataJSON bytes when set.
    public var clientDataOverride: [UInt8]?

    public var clientDataJSON: [UInt8] { clientDataOverride ?? clientData.bytes }

    public var attestationObject: [UInt8] {
        attestationObjectOverride ?? CBOREncoder.encode(.map([
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
        var o: JSONObject = ["id": .string(Base64URL.encode(id)), "rawId": .string(Base64URL.encode(id)), "type": "public-key",
                             "response": .object(response), "clientExtensionResults": [:]]
        if let attachment { o["authenticatorAttachment"] = .string(attachment.rawValue) }
        return .object(o)
    }

    public var jsonBytes: [UInt8] { json.serializedBytes() }

    /// The response as the FIDO2 conformance API posts it (ServerAuthenticatorAttestationResponse).
    package var conformanceJSON: JSONValue { ConformanceShape.from(json) }

    public var response: RegistrationResponse {
        RegistrationResponse(id: id, clientDataJSON: clientDataJSON, attestationObject: attestationObject, transports: transports)
    }
}

/// An authentication response as plain values.
public struct AssertionParts: Sendable {
    public var id: [UInt8]
    public var clientData: ClientDataParts
    public var authenticatorData: AuthenticatorDataParts
    public var signature: [UInt8]
    public var userHandle: [UInt8]?
    public var attachment: AuthenticatorAttachment?
    public var clientDataOverride: [UInt8]?

    public var clientDataJSON: [UInt8] { clientDataOverride ?? clientData.bytes }

    package var json: JSONValue {
        var response: JSONObject = [
            "clientDataJSON": .string(Base64URL.encode(clientDataJSON)),
            "authenticatorData": .string(Base64URL.encode(authenticatorData.bytes)),
            "signature": .string(Base64URL.encode(signature)),
        ]
        response["userHandle"] = userHandle.map { .string(Base64URL.encode($0)) } ?? .null
        var o: JSONObject = ["id": .string(Base64URL.encode(id)), "rawId": .string(Base64URL.encode(id)), "type": "public-key",
                             "response": .object(response), "clientExtensionResults": [:]]
        if let attachment { o["authenticatorAttachment"] = .string(attachment.rawValue) }
        return .object(o)
    }

    public var jsonBytes: [UInt8] { json.serializedBytes() }

    /// The response as the FIDO2 conformance API posts it (ServerAuthenticatorAssertionResponse).
    package var conformanceJSON: JSONValue { ConformanceShape.from(json) }

    public var response: AuthenticationResponse {
        AuthenticationResponse(id: id, clientDataJSON: clientDataJSON, authenticatorData: authenticatorData.bytes,
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
