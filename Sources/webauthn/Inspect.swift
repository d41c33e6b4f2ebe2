import ArgumentParser
import Foundation
import WebAuthnCore
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

struct Inspect: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Decode a response (registration or authentication JSON) or an attestation object (CBOR, raw or base64url) into readable JSON.")

    @Argument(help: "The file to decode; - for stdin.")
    var file: String

    func run() async throws {
        let input = try readInput(file)
        do {
            Output.print(try Self.describe(input))
        } catch let error as WebAuthnError {
            throw VerificationFailure(error: error)
        }
    }

    static func describe(_ input: [UInt8]) throws -> JSONValue {
        let trimmed = String(decoding: input, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.hasPrefix("{") {
            let json = try JSONValue.parse(Array(trimmed.utf8))
            // Accept a bare credential or a vector file that wraps one in "response".
            let credential = json["response"]?["response"] != nil ? json["response"]! : json
            if credential["response"]?["attestationObject"] != nil {
                return try describe(registration: RegistrationResponse(json: credential))
            }
            return try describe(authentication: AuthenticationResponse(json: credential))
        }
        if let decoded = Base64URL.decode(trimmed), !trimmed.isEmpty {
            return try describe(attestationObject: decoded)
        }
        return try describe(attestationObject: input)
    }

    static func describe(registration r: RegistrationResponse) throws -> JSONValue {
        var o: JSONObject = ["ceremony": "registration", "id": .string(Base64URL.encode(r.id))]
        o["clientData"] = (try? JSONValue.parse(r.clientDataJSON)) ?? .string(String(decoding: r.clientDataJSON, as: UTF8.self))
        o["attestationObject"] = try describe(attestationObject: r.attestationObject)
        o["transports"] = .array(r.transports.map { .string($0.rawValue) })
        o["clientExtensionResults"] = .object(r.clientExtensionResults.object)
        return .object(o)
    }

    static func describe(authentication a: AuthenticationResponse) throws -> JSONValue {
        var o: JSONObject = ["ceremony": "authentication", "id": .string(Base64URL.encode(a.id))]
        o["clientData"] = (try? JSONValue.parse(a.clientDataJSON)) ?? .string(String(decoding: a.clientDataJSON, as: UTF8.self))
        o["authenticatorData"] = describe(authenticatorData: try AuthenticatorData(bytes: a.authenticatorData))
        o["signature"] = .string(Base64URL.encode(a.signature))
        o["userHandle"] = a.userHandle.map { .string(Base64URL.encode($0)) } ?? .null
        return .object(o)
    }

    static func describe(attestationObject bytes: [UInt8]) throws -> JSONValue {
        let object = try AttestationObject(bytes: bytes)
        let statement = render(map: object.statement.mapValue ?? []) { pair in
            guard pair.key.textValue == "x5c", let certs = pair.value.arrayValue else { return render(pair.value) }
            return .array(
                certs.map { item in
                    guard let der = item.bytesValue, let cert = try? X509Certificate(der: der) else { return render(item) }
                    return describe(certificate: cert)
                })
        }
        return ["fmt": .string(object.format.rawValue), "attStmt": statement, "authData": describe(authenticatorData: object.authenticatorData)]
    }

    static func describe(authenticatorData a: AuthenticatorData) -> JSONValue {
        var flags: JSONObject = [:]
        for (name, flag) in [
            ("UP", AuthenticatorFlags.userPresent), ("UV", .userVerified), ("BE", .backupEligible),
            ("BS", .backupState), ("AT", .attestedCredentialData), ("ED", .extensionData),
        ] {
            flags[name] = .bool(a.flags.contains(flag))
        }
        var o: JSONObject = [
            "rpIdHash": .string(a.rpIdHash.map { String(format: "%02x", $0) }.joined()),
            "flags": .object(flags),
            "signCount": .number(Double(a.signCount)),
        ]
        if let c = a.attestedCredentialData {
            o["aaguid"] = .string(c.aaguid.description)
            o["credentialId"] = .string(Base64URL.encode(c.credentialId))
            o["credentialPublicKey"] = [
                "alg": .string(c.publicKey.algorithm.description),
                "key": .string(c.publicKey.publicKey.kind.description),
                "cose": .string(Base64URL.encode(c.publicKey.bytes)),
            ]
        }
        if let e = a.extensions { o["extensions"] = render(e) }
        return .object(o)
    }

    static func describe(certificate c: X509Certificate) -> JSONValue {
        let iso = ISO8601DateFormatter()
        return [
            "subject": .string(c.subjectSummary),
            "issuer": .string(c.issuerSummary),
            "notBefore": .string(c.notBefore.map(iso.string) ?? "?"),
            "notAfter": .string(c.notAfter.map(iso.string) ?? "?"),
            "sha256": .string(c.fingerprint),
        ]
    }

    /// A CBOR map as a JSON object: a text key as it is, an integer key in decimal, any other key
    /// in CBOR diagnostic notation (`CBOR.diagnosticNotation`). When two keys would get one name (the text
    /// `"1"` beside the integer 1), the map is an array of `{"key", "type", "value"}` instead, so
    /// that no member hides another (red team, eighteenth pass: one was dropped, and statement keys
    /// were printed as Swift's debugging text, `unsigned(1)`); the name and the key's CBOR type
    /// then tell every two keys apart (round 25: keys were written as JSON, where `[1]` and
    /// `[1.0]`, `h'00'` and `"AA"`, `null` and `undefined` are one).
    ///
    /// Each key is named once, and each value rendered once: the array form rendered every key
    /// again, so keys nested in keys doubled the work at each level (round 25: 26 s for 36 KB).
    static func render(map pairs: [CBORPair], value: (CBORPair) -> JSONValue = { render($0.value) }) -> JSONValue {
        let names = pairs.map { $0.key.textValue ?? $0.key.integerText ?? $0.key.diagnosticNotation }
        guard Set(names).count == names.count else {
            return .array(zip(pairs, names).map { pair, name in ["key": .string(name), "type": .string(typeName(pair.key)), "value": value(pair)] })
        }
        return .object(JSONObject(zip(names, pairs.map(value)).map { ($0, $1) }))
    }

    /// The CBOR type of `item`, by name.
    static func typeName(_ item: CBOR) -> String {
        switch item {
        case .unsigned, .negative: "integer"
        case .bytes: "bytes"
        case .text: "text"
        case .array: "array"
        case .map: "map"
        case .bool: "bool"
        case .float: "float"
        case .null: "null"
        case .undefined: "undefined"
        }
    }

    /// CBOR rendered as JSON: byte strings as base64url text.
    static func render(_ value: CBOR) -> JSONValue {
        switch value {
        // A JSON number past 2^53 is read as a rounded double, and was printed as one
        // (18446744073709551615 as 1.8446744073709552e+19): such an integer is exact decimal text.
        case .unsigned(let n) where n <= 1 << 53: return .number(Double(n))
        case .negative(let n) where n < 1 << 53: return .number(-1 - Double(n))
        case .unsigned, .negative: return .string(value.integerText ?? "")
        case .bytes(let b): return .string(Base64URL.encode(b))
        case .text(let t): return .string(t)
        case .array(let items): return .array(items.map(render))
        case .map(let pairs): return render(map: pairs)
        case .bool(let b): return .bool(b)
        case .null, .undefined: return .null
        case .float(let d):
            // JSON has no NaN or infinity: named, as a string, rather than written as something no parser reads.
            guard d.isFinite else { return .string(d.isNaN ? "NaN" : d > 0 ? "Infinity" : "-Infinity") }
            return .number(d)
        }
    }
}
