public import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// `authenticatorSelection` of creation options (WebAuthn L3 §5.4.4).
public struct AuthenticatorSelection: Sendable, Equatable {
    /// `platform` or `cross-platform`; nil for either.
    public var authenticatorAttachment: AuthenticatorAttachment?
    /// `discouraged`, `preferred` or `required`.
    public var residentKey: ResidentKeyRequirement
    /// `required`, `preferred` or `discouraged` (WebAuthn L3 §5.8.6).
    public var userVerification: UserVerificationRequirement

    /// A selection; by default any attachment, a preferred discoverable credential
    /// and preferred user verification.
    public init(
        authenticatorAttachment: AuthenticatorAttachment? = nil, residentKey: ResidentKeyRequirement = .preferred,
        userVerification: UserVerificationRequirement = .preferred
    ) {
        self.authenticatorAttachment = authenticatorAttachment
        self.residentKey = residentKey
        self.userVerification = userVerification
    }

    /// The selection a client asked for (`AuthenticatorSelectionCriteria` as JSON) over
    /// `defaults`, per L3 §5.4.4: unknown members and values are ignored; without
    /// `residentKey`, `requireResidentKey` decides (true: required, false: discouraged).
    /// `asked` is the known members as they were given (what the conformance API echoes).
    package static func requested(_ json: JSONObject, over defaults: AuthenticatorSelection) -> (selection: AuthenticatorSelection, asked: JSONObject) {
        var selection = defaults, asked = JSONObject()
        if let uv = json["userVerification"]?.stringValue.flatMap(UserVerificationRequirement.init(rawValue:)) {
            selection.userVerification = uv
            asked["userVerification"] = .string(uv.rawValue)
        }
        if let attachment = json["authenticatorAttachment"]?.stringValue.map(AuthenticatorAttachment.init(rawValue:)),
            AuthenticatorAttachment.specified.contains(attachment)
        {
            selection.authenticatorAttachment = attachment
            asked["authenticatorAttachment"] = .string(attachment.rawValue)
        }
        let require = json["requireResidentKey"]?.boolValue
        if let require { asked["requireResidentKey"] = .bool(require) }
        if let rk = json["residentKey"]?.stringValue.map(ResidentKeyRequirement.init(rawValue:)), ResidentKeyRequirement.specified.contains(rk) {
            selection.residentKey = rk
            asked["residentKey"] = .string(rk.rawValue)
        } else if let require {
            selection.residentKey = require ? .required : .discouraged
        }
        return (selection, asked)
    }

    var json: JSONValue {
        var o = JSONObject()
        if let a = authenticatorAttachment { o["authenticatorAttachment"] = .string(a.rawValue) }
        o["residentKey"] = .string(residentKey.rawValue)
        o["requireResidentKey"] = .bool(residentKey == .required)
        o["userVerification"] = .string(userVerification.rawValue)
        return .object(o)
    }
}

/// `PublicKeyCredentialCreationOptions`, encoded as the L3
/// `PublicKeyCredentialCreationOptionsJSON` that browsers'
/// `PublicKeyCredential.parseCreationOptionsFromJSON()` accept.
public struct CreationOptions: Sendable {
    /// The RP ID (`rp.id`).
    public let rpId: String
    /// The relying party's name (`rp.name`).
    public let rpName: String
    /// The account the credential is for (`user`).
    public let user: UserEntity
    /// The challenge (base64url in the JSON).
    public let challenge: [UInt8]
    /// The algorithms of `pubKeyCredParams`, in preference order.
    public let algorithms: [COSEAlgorithm]
    /// Milliseconds.
    public let timeout: Int
    /// The user's existing credentials, which the authenticator must not register again.
    public let excludeCredentials: [CredentialDescriptor]
    /// Which authenticators may be used (`authenticatorSelection`).
    public let authenticatorSelection: AuthenticatorSelection
    /// `none`, `indirect`, `direct` or `enterprise`.
    public let attestation: AttestationConveyancePreference
    /// `security-key`, `client-device`, `hybrid`.
    public let hints: [PublicKeyCredentialHint]
    /// The attestation formats preferred, most preferred first (`attestationFormats`); empty: any.
    public let attestationFormats: [AttestationFormat]
    /// The extension inputs (`extensions`).
    public let extensions: ClientExtensions

    package var json: JSONValue {
        var o = JSONObject()
        o["rp"] = ["id": .string(rpId), "name": .string(rpName)]
        o["user"] = ["id": .string(Base64URL.encode(user.id)), "name": .string(user.name), "displayName": .string(user.displayName)]
        o["challenge"] = .string(Base64URL.encode(challenge))
        o["pubKeyCredParams"] = .array(algorithms.map { ["type": "public-key", "alg": .number(Double($0.rawValue))] })
        o["timeout"] = .number(Double(timeout))
        o["excludeCredentials"] = .array(excludeCredentials.map(Self.descriptor))
        o["authenticatorSelection"] = authenticatorSelection.json
        o["attestation"] = .string(attestation.rawValue)
        if !attestationFormats.isEmpty { o["attestationFormats"] = .array(attestationFormats.map { .string($0.rawValue) }) }
        o["hints"] = .array(hints.map { .string($0.rawValue) })
        o["extensions"] = .object(extensions.object)
        return .object(o)
    }

    /// A descriptor as JSON, its transports sorted and each once: in the order a client once sent
    /// them, a real credential's told it from a stand-in's, which are sorted (red team,
    /// thirty-second pass: `["internal","hybrid"]` was only ever real).
    static func descriptor(_ d: CredentialDescriptor) -> JSONValue {
        var o: JSONObject = ["type": "public-key", "id": .string(Base64URL.encode(d.id))]
        if !d.transports.isEmpty { o["transports"] = .array(Set(d.transports.map(\.rawValue)).sorted().map(JSONValue.string)) }
        return .object(o)
    }
}

/// `PublicKeyCredentialRequestOptions`, encoded as the L3
/// `PublicKeyCredentialRequestOptionsJSON`.
public struct RequestOptions: Sendable {
    /// The RP ID (`rpId`).
    public let rpId: String
    /// The challenge (base64url in the JSON).
    public let challenge: [UInt8]
    /// Milliseconds.
    public let timeout: Int
    /// The credentials that may answer; empty for a discoverable (usernameless) login.
    public let allowCredentials: [CredentialDescriptor]
    /// `required`, `preferred` or `discouraged` (WebAuthn L3 §5.8.6).
    public let userVerification: UserVerificationRequirement
    /// `security-key`, `client-device`, `hybrid`.
    public let hints: [PublicKeyCredentialHint]
    /// The extension inputs (`extensions`).
    public let extensions: ClientExtensions

    package var json: JSONValue {
        var o = JSONObject()
        o["challenge"] = .string(Base64URL.encode(challenge))
        o["timeout"] = .number(Double(timeout))
        o["rpId"] = .string(rpId)
        o["allowCredentials"] = .array(allowCredentials.map(CreationOptions.descriptor))
        o["userVerification"] = .string(userVerification.rawValue)
        o["hints"] = .array(hints.map { .string($0.rawValue) })
        o["extensions"] = .object(extensions.object)
        return .object(o)
    }
}

extension CreationOptions {
    /// The options as `PublicKeyCredentialCreationOptionsJSON`, for the browser's
    /// `PublicKeyCredential.parseCreationOptionsFromJSON`.
    public var jsonString: String { json.serialized() }
    /// ``jsonString`` as UTF-8 bytes, for an HTTP body.
    public var jsonBytes: [UInt8] { Array(jsonString.utf8) }
}

extension RequestOptions {
    /// The options as `PublicKeyCredentialRequestOptionsJSON`, for the browser's
    /// `PublicKeyCredential.parseRequestOptionsFromJSON`.
    public var jsonString: String { json.serialized() }
    /// ``jsonString`` as UTF-8 bytes, for an HTTP body.
    public var jsonBytes: [UInt8] { Array(jsonString.utf8) }
}
