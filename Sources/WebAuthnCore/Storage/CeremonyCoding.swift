internal import Foundation
public import _WebAuthnEncoding
internal import _WebAuthnCrypto

extension PendingCeremony {
    /// A stable JSON form, for stores that persist pending ceremonies.
    package var json: JSONValue {
        var o: JSONObject = [
            "v": 1,
            "kind": .string(kind.rawValue),
            "challenge": .string(Base64URL.encode(challenge)),
            "allowCredentials": .array(allowCredentials.map { .string(Base64URL.encode($0)) }),
            "algorithms": .array(algorithms.map { .number(Double($0.rawValue)) }),
            "userVerification": .string(userVerification.rawValue),
            "conditionalCreate": .bool(conditionalCreate),
            "newAccount": .bool(newAccount),
            "expiresAt": .number(expiresAt.timeIntervalSince1970),
        ]
        if let user {
            o["user"] = ["id": .string(Base64URL.encode(user.id)), "name": .string(user.name), "displayName": .string(user.displayName)]
        }
        if let userHandle { o["userHandle"] = .string(Base64URL.encode(userHandle)) }
        if let binding { o["binding"] = .string(Base64URL.encode(binding)) }
        if residentKey != .discouraged { o["residentKey"] = .string(residentKey.rawValue) }
        if let authenticatorAttachment { o["authenticatorAttachment"] = .string(authenticatorAttachment.rawValue) }
        if let credentialProtection {
            o["credProtect"] = ["level": .number(Double(credentialProtection.policy.rawValue)), "enforce": .bool(credentialProtection.enforce)]
        }
        if let appID { o["appid"] = .string(appID) }
        if addsToAccount { o["addsToAccount"] = true }
        return .object(o)
    }

    /// Reads the form `json` writes. Throws `storage_failure` on anything else.
    /// A stable serialized form (UTF-8 JSON), for stores that persist pending ceremonies.
    public var serialized: [UInt8] { Array(json.serialized().utf8) }

    /// Reads what ``serialized`` wrote. Throws `storage_failure` on anything else.
    public init(serialized bytes: [UInt8]) throws(WebAuthnError) {
        let value: JSONValue
        do { value = try JSONValue.parse(bytes, limits: JSONLimits(maxBytes: 1 << 20, maxDepth: 8)) } catch {
            throw WebAuthnError(.storageFailure, "stored ceremony: not JSON (\(error.code))")
        }
        try self.init(json: value)
    }

    package init(json: JSONValue) throws(WebAuthnError) {
        func bad(_ what: String) -> WebAuthnError { WebAuthnError(.storageFailure, "stored ceremony: \(what)") }
        guard json["v"]?.intValue == 1, let kind = json["kind"]?.stringValue.flatMap(Kind.init(rawValue:)),
            let challenge = json["challenge"]?.stringValue.flatMap(Base64URL.decode),
            let uv = json["userVerification"]?.stringValue.flatMap(UserVerificationRequirement.init(rawValue:)),
            let expires = json["expiresAt"]?.numberValue
        else { throw bad("unreadable") }
        var user: UserEntity?
        if let u = json["user"] {
            guard let id = u["id"]?.stringValue.flatMap(Base64URL.decode), let name = u["name"]?.stringValue else { throw bad("user") }
            user = try UserEntity(id: id, name: name, displayName: u["displayName"]?.stringValue)
        }
        self.init(
            kind: kind, challenge: challenge, user: user,
            userHandle: json["userHandle"]?.stringValue.flatMap(Base64URL.decode),
            allowCredentials: (json["allowCredentials"]?.arrayValue ?? []).compactMap { $0.stringValue.flatMap(Base64URL.decode) },
            algorithms: (json["algorithms"]?.arrayValue ?? []).compactMap { $0.intValue.map { COSEAlgorithm($0) } },
            userVerification: uv, conditionalCreate: json["conditionalCreate"]?.boolValue ?? false,
            newAccount: json["newAccount"]?.boolValue ?? false, addsToAccount: json["addsToAccount"]?.boolValue ?? false,
            residentKey: json["residentKey"]?.stringValue.map(ResidentKeyRequirement.init(rawValue:)) ?? .discouraged,
            authenticatorAttachment: json["authenticatorAttachment"]?.stringValue.map(AuthenticatorAttachment.init(rawValue:)),
            credentialProtection: json["credProtect"].flatMap { p in
                p["level"]?.intValue.flatMap(CredentialProtectionPolicy.init(rawValue:)).map {
                    CredentialProtectionRequest(policy: $0, enforce: p["enforce"]?.boolValue ?? false)
                }
            },
            appID: json["appid"]?.stringValue,
            binding: json["binding"]?.stringValue.flatMap(Base64URL.decode),
            expiresAt: Date(timeIntervalSince1970: expires))
    }
}
