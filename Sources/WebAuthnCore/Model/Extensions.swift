internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// credProtect levels (CTAP 2.1 §12.1): when the authenticator reveals the credential.
public enum CredentialProtectionPolicy: Int, Sendable, CaseIterable, Comparable {
    /// Level 1: the credential is usable with or without user verification (the default of every authenticator).
    case userVerificationOptional = 1
    /// Level 2: a discoverable credential is found without UV only when its ID is given (`allowCredentials`).
    case userVerificationOptionalWithCredentialIDList = 2
    /// Level 3: the credential is usable only with user verification.
    case userVerificationRequired = 3

    /// The WebAuthn name (`credentialProtectionPolicy`), such as `userVerificationRequired`.
    public var name: String {
        switch self {
        case .userVerificationOptional: "userVerificationOptional"
        case .userVerificationOptionalWithCredentialIDList: "userVerificationOptionalWithCredentialIDList"
        case .userVerificationRequired: "userVerificationRequired"
        }
    }

    /// The level with this WebAuthn name, if any.
    public init?(name: String) {
        guard let level = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = level
    }

    /// Levels order by strength: 1 < 2 < 3.
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}

/// A credProtect request the relying party made in creation options, kept with the ceremony.
public struct CredentialProtectionRequest: Sendable, Equatable {
    /// The level asked for.
    public var policy: CredentialProtectionPolicy
    /// `enforceCredentialProtectionPolicy`: the registration must not end with a weaker level.
    public var enforce: Bool

    /// A request for `policy`, enforced or not.
    public init(policy: CredentialProtectionPolicy, enforce: Bool) {
        self.policy = policy
        self.enforce = enforce
    }
}

/// Inputs of the `prf` extension (WebAuthn L3 §10.1.4): one or two salts the
/// authenticator turns into secrets that only the page sees.
public struct PRFInputs: Sendable, Equatable {
    /// The first salt input.
    public var first: [UInt8]
    /// The optional second salt input.
    public var second: [UInt8]?

    /// Inputs `first` and, optionally, `second`.
    public init(first: [UInt8], second: [UInt8]? = nil) {
        self.first = first
        self.second = second
    }

    var json: JSONValue {
        var o: JSONObject = ["first": .string(Base64URL.encode(first))]
        if let second { o["second"] = .string(Base64URL.encode(second)) }
        return .object(o)
    }
}

/// The `largeBlob` support a registration asks for (WebAuthn L3 §10.1.5).
public enum LargeBlobSupport: String, Sendable {
    /// The credential must be created on an authenticator with large-blob storage.
    case required
    /// Large-blob storage is wanted, not required.
    case preferred
}

extension ClientExtensions {
    /// Asks the client to report whether the credential is discoverable (`credProps`, L3 §10.1.3).
    public mutating func requestCredentialProperties() { object["credProps"] = .bool(true) }

    /// Asks for a credProtect level (CTAP 2.1 §12.1); with `enforce`, a client that
    /// cannot honour it fails, and the engine refuses a registration whose
    /// authenticator data reports a weaker level (`credential_protection_weaker`).
    public mutating func requestCredentialProtection(_ policy: CredentialProtectionPolicy, enforce: Bool) {
        object["credentialProtectionPolicy"] = .string(policy.name)
        object["enforceCredentialProtectionPolicy"] = .bool(enforce)
    }

    /// Registration: asks for a PRF-capable credential (`prf`), with inputs to evaluate at once if given.
    /// The secrets go to the page only; the engine records `prf.enabled` and drops any `results` it is sent.
    public mutating func requestPRF(eval: PRFInputs? = nil) { requestPRF(eval: eval, evalByCredential: [:]) }

    /// Authentication: PRF inputs for every credential (`eval`) and per credential ID (`evalByCredential`).
    public mutating func requestPRF(eval: PRFInputs?, evalByCredential: [[UInt8]: PRFInputs]) {
        var prf = JSONObject()
        if let eval { prf["eval"] = eval.json }
        if !evalByCredential.isEmpty {
            var byCredential = JSONObject()
            for (id, inputs) in evalByCredential.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
                byCredential[Base64URL.encode(id)] = inputs.json
            }
            prf["evalByCredential"] = .object(byCredential)
        }
        object["prf"] = .object(prf)
    }

    /// Registration: asks for large-blob storage (`largeBlob.support`); the engine records `largeBlob.supported`.
    public mutating func requestLargeBlob(support: LargeBlobSupport) { object["largeBlob"] = ["support": .string(support.rawValue)] }

    /// Authentication: asks the authenticator to read the credential's large blob (returned to the page).
    public mutating func requestLargeBlobRead() { object["largeBlob"] = ["read": .bool(true)] }

    /// Authentication: asks the authenticator to store `blob` as the credential's large blob.
    public mutating func requestLargeBlobWrite(_ blob: [UInt8]) { object["largeBlob"] = ["write": .string(Base64URL.encode(blob))] }

    /// Registration: asks the authenticator for its minimum PIN length (`minPinLength`, CTAP 2.1 §12.4),
    /// which it reports only to relying parties it is configured to tell.
    public mutating func requestMinPinLength() { object["minPinLength"] = .bool(true) }

    /// Authentication: the U2F AppID (`appid`, L3 §10.1.1) under which a credential registered
    /// with the U2F API may still sign. The engine keeps it only when it is the policy's
    /// ``VerificationPolicy/u2fAppID``.
    public mutating func setAppID(_ appID: String) { object["appid"] = .string(appID) }

    /// Registration: the U2F AppID whose credentials the authenticator must also exclude (`appidExclude`, L3 §10.1.2).
    public mutating func setAppIDExclude(_ appID: String) { object["appidExclude"] = .string(appID) }

    /// The credProtect request in these inputs, if any (an unknown level name is no request).
    public var credentialProtectionRequest: CredentialProtectionRequest? {
        guard let name = object["credentialProtectionPolicy"]?.stringValue, let policy = CredentialProtectionPolicy(name: name) else { return nil }
        return CredentialProtectionRequest(policy: policy, enforce: object["enforceCredentialProtectionPolicy"]?.boolValue ?? false)
    }

    /// The `appid` input, if any.
    public var appID: String? { object["appid"]?.stringValue }

    /// The inputs without `appid`.
    package func removingAppID() -> ClientExtensions {
        var copy = self
        copy.object["appid"] = nil
        return copy
    }

    /// Client extension outputs as the engine keeps them: `prf.results` and a read
    /// `largeBlob.blob` are dropped (secrets and user data the server has no use for).
    package func sanitizedOutputs() -> ClientExtensions {
        var copy = self
        if var prf = copy.object["prf"]?.objectValue {
            prf["results"] = nil
            copy.object["prf"] = .object(prf)
        }
        if var largeBlob = copy.object["largeBlob"]?.objectValue {
            largeBlob["blob"] = nil
            copy.object["largeBlob"] = .object(largeBlob)
        }
        return copy
    }
}

/// What a registration established about a credential beyond its key: requested
/// properties and extension outputs, recorded with the credential record.
/// Every member is nil when the ceremony did not say.
public struct CredentialProperties: Sendable, Equatable {
    /// Whether the credential is discoverable (a passkey the authenticator can offer
    /// without a user name): `credProps.rk`, or true when the options required one.
    public var discoverable: Bool?
    /// The attachment the client reported (`authenticatorAttachment`).
    public var authenticatorAttachment: AuthenticatorAttachment?
    /// The credProtect level the authenticator reported.
    public var credentialProtection: CredentialProtectionPolicy?
    /// `prf.enabled`: the credential can evaluate PRFs.
    public var prfEnabled: Bool?
    /// `largeBlob.supported`: the credential has large-blob storage.
    public var largeBlobSupported: Bool?
    /// The authenticator's minimum PIN length (`minPinLength`), when it told this relying party.
    public var minPinLength: Int?

    /// Properties; every parameter defaults to nil (not reported).
    public init(
        discoverable: Bool? = nil, authenticatorAttachment: AuthenticatorAttachment? = nil,
        credentialProtection: CredentialProtectionPolicy? = nil, prfEnabled: Bool? = nil, largeBlobSupported: Bool? = nil,
        minPinLength: Int? = nil
    ) {
        self.discoverable = discoverable
        self.authenticatorAttachment = authenticatorAttachment
        self.credentialProtection = credentialProtection
        self.prfEnabled = prfEnabled
        self.largeBlobSupported = largeBlobSupported
        self.minPinLength = minPinLength
    }

    /// A stable JSON form (members only when set), as the SQL stores keep it.
    package var json: JSONValue {
        var o = JSONObject()
        if let discoverable { o["discoverable"] = .bool(discoverable) }
        if let authenticatorAttachment { o["authenticatorAttachment"] = .string(authenticatorAttachment.rawValue) }
        if let credentialProtection { o["credProtect"] = .number(Double(credentialProtection.rawValue)) }
        if let prfEnabled { o["prf"] = .bool(prfEnabled) }
        if let largeBlobSupported { o["largeBlob"] = .bool(largeBlobSupported) }
        if let minPinLength { o["minPinLength"] = .number(Double(minPinLength)) }
        return .object(o)
    }

    /// Reads the form ``json`` writes; unknown or ill-typed members are left nil.
    package init(json: JSONValue) {
        self.init(
            discoverable: json["discoverable"]?.boolValue,
            authenticatorAttachment: json["authenticatorAttachment"]?.stringValue.map(AuthenticatorAttachment.init(rawValue:)),
            credentialProtection: json["credProtect"]?.intValue.flatMap(CredentialProtectionPolicy.init(rawValue:)),
            prfEnabled: json["prf"]?.boolValue, largeBlobSupported: json["largeBlob"]?.boolValue,
            minPinLength: json["minPinLength"]?.intValue)
    }
}

/// The registration checks of extension outputs and requested properties
/// (WebAuthn L3 §7.1 step 21 and the options of steps 1–3), each a named function.
enum ExtensionChecks {
    static let step = "WebAuthn L3 §7.1 step 21"

    /// credProtect (CTAP 2.1 §12.1): the level the authenticator data reports, if any;
    /// a value that is not 1, 2 or 3 is `extension_output_invalid`.
    static func reportedCredentialProtection(_ extensions: CBOR?) throws(WebAuthnError) -> CredentialProtectionPolicy? {
        guard let value = extensions?["credProtect"] else { return nil }
        guard let level = value.intValue.flatMap(CredentialProtectionPolicy.init(rawValue:)) else {
            throw WebAuthnError(.extensionOutputInvalid, "the credProtect output is not 1, 2 or 3", step: step)
        }
        return level
    }

    /// credProtect, enforced: a registration whose authenticator data reports a weaker
    /// level than an enforced request (no output means level 1) is refused.
    static func verifyCredentialProtection(reported: CredentialProtectionPolicy?, requested: CredentialProtectionRequest?) throws(WebAuthnError) {
        guard let requested, requested.enforce else { return }
        let level = reported ?? .userVerificationOptional
        guard level >= requested.policy else {
            throw WebAuthnError(
                .credentialProtectionWeaker,
                "credProtect \(requested.policy.name) was enforced; the authenticator reports \(reported.map(\.name) ?? "none (userVerificationOptional)")",
                step: step)
        }
    }

    /// minPinLength (CTAP 2.1 §12.4): the length the authenticator data reports, if any (4 to 63).
    static func reportedMinPinLength(_ extensions: CBOR?) throws(WebAuthnError) -> Int? {
        guard let value = extensions?["minPinLength"] else { return nil }
        guard let length = value.intValue, (4...63).contains(length) else {
            throw WebAuthnError(.extensionOutputInvalid, "the minPinLength output is not a length from 4 to 63", step: step)
        }
        return length
    }

    /// credProps (L3 §10.1.3): `rk` as the client reported it; nil when absent, an error when not a boolean.
    static func reportedDiscoverable(_ outputs: ClientExtensions) throws(WebAuthnError) -> Bool? {
        guard let credProps = outputs.object["credProps"] else { return nil }
        guard let object = credProps.objectValue else {
            throw WebAuthnError(.extensionOutputInvalid, "credProps is not an object", step: step)
        }
        guard let rk = object["rk"] else { return nil }
        guard let value = rk.boolValue else { throw WebAuthnError(.extensionOutputInvalid, "credProps.rk is not a boolean", step: step) }
        return value
    }

    /// A discoverable credential was required (`residentKey: "required"`): a client that
    /// reports `credProps.rk: false` contradicts it. Refused under `refuse`, else recorded.
    /// Returns what to record: the reported value, or true when one was required and none reported.
    static func verifyDiscoverable(reported: Bool?, required: Bool, refuse: Bool) throws(WebAuthnError) -> Bool? {
        if required && reported == false && refuse {
            throw WebAuthnError(
                .discoverableCredentialMissing, "the options required a discoverable credential and the client reports credProps.rk = false", step: step)
        }
        return reported ?? (required ? true : nil)
    }

    /// `prf.enabled` or `largeBlob.supported`: a boolean member of an output object; nil when absent.
    static func reportedFlag(_ outputs: ClientExtensions, _ identifier: String, _ member: String) throws(WebAuthnError) -> Bool? {
        guard let output = outputs.object[identifier] else { return nil }
        guard let object = output.objectValue else { throw WebAuthnError(.extensionOutputInvalid, "\(identifier) is not an object", step: step) }
        guard let flag = object[member] else { return nil }
        guard let value = flag.boolValue else { throw WebAuthnError(.extensionOutputInvalid, "\(identifier).\(member) is not a boolean", step: step) }
        return value
    }
}
