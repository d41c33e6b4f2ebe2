import Foundation
@testable import WebAuthnCore
@testable import _WebAuthnEncoding
@testable import _WebAuthnCrypto
@testable import WebAuthnMetadata
@testable import WebAuthnTesting

/// Writes the seed corpora (`webauthn-fuzz --write-seeds DIR`, `make fuzz-seeds`):
/// a few inputs per target, cut from TestVectors (W3C, real devices) and made
/// by the software authenticator under the fuzz PKI (Fuzz/Keys) for the fixed
/// relying party, so the whole-ceremony seeds verify. Generated seeds carry
/// fresh keys and signatures, so each run rewrites them with new bytes.
enum Seeds {
    nonisolated(unsafe) static var folder = URL(fileURLWithPath: ".")
    nonisolated(unsafe) static var written = 0

    static func put(_ target: String, _ name: String, _ bytes: [UInt8]) {
        precondition(allTargets.contains { $0.name == target }, "no target \(target)")
        let dir = folder.appendingPathComponent(target)
        try! FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try! Data(bytes).write(to: dir.appendingPathComponent(name))
        written += 1
    }

    static func put(_ target: String, _ name: String, _ text: String) { put(target, name, Array(text.utf8)) }

    // MARK: Vectors

    static func vector(_ path: String) -> JSONValue {
        let url = Fixtures.repository.appendingPathComponent("TestVectors/\(path)")
        guard let data = FileManager.default.contents(atPath: url.path),
            let json = try? JSONValue.parse([UInt8](data), limits: JSONLimits(maxBytes: 64 << 20, maxDepth: 64))
        else {
            fatalError("cannot read TestVectors/\(path)")
        }
        return json
    }

    static func hex(_ value: JSONValue?) -> [UInt8] {
        guard let text = value?.stringValue, let bytes = Bytes.fromHex(text) else { fatalError("not hex: \(String(describing: value))") }
        return bytes
    }

    static func b64(_ value: JSONValue?) -> [UInt8] {
        guard let text = value?.stringValue, let bytes = Base64URL.decode(text) else { fatalError("not base64url: \(String(describing: value))") }
        return bytes
    }

    /// (clientDataJSON, attestationObject) of a registration vector, W3C or real-device.
    static func registration(_ path: String) -> (clientDataJSON: [UInt8], attestationObject: [UInt8]) {
        let v = vector(path)
        if let fields = v["registration"]?["spec_fields"] {
            return (hex(fields["clientDataJSON"]), hex(fields["attestationObject"]))
        }
        let r = v["response"]!["response"]!
        return (b64(r["clientDataJSON"]), b64(r["attestationObject"]))
    }

    static func statement(_ path: String) -> CBOR {
        guard let object = try? AttestationObject(bytes: registration(path).attestationObject) else { fatalError("\(path): no attestation object") }
        return object.statement
    }

    static func x5c(_ path: String) -> [X509Certificate] {
        (statement(path)["x5c"]?.arrayValue ?? []).compactMap { $0.bytesValue.flatMap { try? X509Certificate(der: $0) } }
    }

    static func name(_ path: String) -> String {
        String(path.split(separator: "/").last!.dropLast(".json".count).prefix(80))
    }

    // MARK: Writing

    static func write(to folder: URL) throws {
        self.folder = folder
        try Fixtures.writeMissingKeys()
        Fixtures.warmUp()
        try writeParsers()
        try writeFormats()
        try writeTrust()
        try writeCeremonies()
        print("wrote \(written) seeds under \(folder.path)")
    }

    static let formatVectors: [String: [String]] = [
        "packed": [
            "w3c/w3c-packed-es256.json", "w3c/w3c-packed-rs256.json", "w3c/w3c-packed-self-es256.json",
            "realworld/py_webauthn-reg-packed-verify_attestation_from_yubikey_firefox.json",
        ],
        "fido-u2f": ["w3c/w3c-fido-u2f-es256.json", "realworld/simplewebauthn-reg-fido-u2f-should-verify-fido-u2f-attestation.json"],
        "tpm": [
            "w3c/w3c-tpm-es256.json", "realworld/simplewebauthn-reg-tpm-should-verify-tpm-response.json",
            "realworld/py_webauthn-reg-tpm-verify_attestation_dell_xps_13.json",
        ],
        "android-key": [
            "w3c/w3c-android-key-es256.json",
            "realworld/simplewebauthn-reg-android-key-should-verify-android-keystore-response-from-a-pixel-8a-in-january-202.json",
        ],
        "android-safetynet": ["realworld/py_webauthn-reg-android-safetynet-verify_attestation_android_safetynet.json"],
        "apple": ["w3c/w3c-apple-es256.json", "realworld/py_webauthn-reg-apple-verify_attestation_apple_passkey.json"],
        "compound": [],
    ]

    static func writeParsers() throws {
        let realReg = vector("realworld/simplewebauthn-reg-packed-should-verify-packed-ec2-attestation.json")
        let realAuth = vector("realworld/simplewebauthn-auth-should-verify-an-assertion-response.json")
        let w3c = vector("w3c/w3c-packed-es256.json")
        put("json", "realworld-registration", realReg["response"]!.serializedBytes())
        put("json", "realworld-authentication", realAuth["response"]!.serializedBytes())
        put("json", "w3c-registration", w3c["webauthn_json"]!["registration"]!.serializedBytes())
        put("json", "escapes-numbers", #"{"a":[1,-0.5,1e300,true,false,null],"b":"\u00e9\ud83d\ude00\n\"\\","c":{}}"#)

        let cdj = realReg["response"]!["response"]!["clientDataJSON"]!.stringValue!
        put("base64url", "clientDataJSON", cdj)
        put("base64url", "padded", "AAECAwQ=")
        put("base64url", "standard-alphabet", "+/+/AA==")
        put("base64url", "two-bytes", "_-8")

        put("cbor", "w3c-packed-es256-attestationObject", registration("w3c/w3c-packed-es256.json").attestationObject)
        put("cbor", "w3c-tpm-es256-attestationObject", registration("w3c/w3c-tpm-es256.json").attestationObject)
        put(
            "cbor", "tags-floats-indefinite",
            [
                0xbf, 0x61, 0x61, 0xc1, 0x1a, 0x00, 0x01, 0x00, 0x00, 0x61, 0x62, 0xfb, 0x40, 0x09, 0x21, 0xfb,
                0x54, 0x44, 0x2d, 0x18, 0x61, 0x63, 0x5f, 0x41, 0x01, 0x41, 0x02, 0xff, 0xff,
            ])

        // COSE keys of every algorithm the W3C vectors carry.
        for path in [
            "w3c/w3c-packed-es256.json", "w3c/w3c-packed-es384.json", "w3c/w3c-packed-es512.json", "w3c/w3c-packed-rs256.json",
            "w3c/w3c-packed-eddsa.json", "w3c/w3c-packed-ed448.json",
        ] {
            let object = try AttestationObject(bytes: registration(path).attestationObject)
            put("cose-key", name(path), object.authenticatorData.attestedCredentialData!.publicKey.bytes)
            if path.hasSuffix("es256.json") || path.hasSuffix("eddsa.json") {
                put("authenticator-data", name(path) + "-registration", object.authenticatorData.bytes)
            }
        }
        put("authenticator-data", "w3c-packed-es256-authentication", hex(w3c["authentication"]!["spec_fields"]!["authenticatorData"]))
        let extensionVector = vector("realworld/simplewebauthn-auth-should-return-authenticator-extension-output.json")
        put("authenticator-data", "realworld-extensions", b64(extensionVector["response"]!["response"]!["authenticatorData"]))

        put("client-data", "create", Fixtures.createClientData.bytes)
        put("client-data", "get", Fixtures.getClientData.bytes)
        put("client-data", "w3c-cross-origin", registration("w3c/w3c-none-es256-crossOrigin.json").clientDataJSON)
        put("client-data", "w3c-top-origin", registration("w3c/w3c-none-es256-topOrigin.json").clientDataJSON)

        // DER the engine reads itself: KeyDescription, the TPM SAN and EKU, the Apple nonce.
        let androidLeaf = x5c("w3c/w3c-android-key-es256.json")[0]
        put("der", "android-key-description", try androidLeaf.extension(oid: X509Certificate.OID.androidKeyDescription)!.value)
        let aik = x5c("w3c/w3c-tpm-es256.json")[0]
        put("der", "tpm-subject-alternative-name", try aik.extension(oid: X509Certificate.OID.subjectAltName)!.value)
        put("der", "tpm-extended-key-usage", try aik.extension(oid: X509Certificate.OID.extendedKeyUsage)!.value)
        let appleLeaf = x5c("w3c/w3c-apple-es256.json")[0]
        put("der", "apple-nonce", try appleLeaf.extension(oid: "1.2.840.113635.100.8.2")!.value)
    }

    static func writeFormats() throws {
        for (format, paths) in formatVectors {
            for path in paths {
                let r = registration(path)
                put(format, name(path), Digest.sha256(r.clientDataJSON) + r.attestationObject)
            }
        }
        // One generated statement per format, under the fuzz root (anchored: the trusted path).
        for (format, parts) in try generatedRegistrations() where formatVectors[parts.format.rawValue] != nil {
            put(parts.format.rawValue, "generated-" + format, Digest.sha256(parts.clientDataJSON) + parts.attestationObject)
        }

        for path in ["w3c/w3c-tpm-es256.json", "realworld/simplewebauthn-reg-tpm-should-verify-tpm-response.json"] {
            let s = statement(path)
            put("tpm-structures", name(path) + "-pubArea", [0] + s["pubArea"]!.bytesValue!)
            put("tpm-structures", name(path) + "-certInfo", [1] + s["certInfo"]!.bytesValue!)
        }
        for path in formatVectors["android-key"]! {
            put("android-key-description", name(path), try x5c(path)[0].extension(oid: X509Certificate.OID.androidKeyDescription)!.value)
        }

        for path in formatVectors["android-safetynet"]! {
            let response = statement(path)["response"]!.bytesValue!
            put("safetynet-jws", name(path), response)
            if let jws = try? JWS(compact: response) {
                put("safetynet-payload", name(path), jws.payload.serializedBytes())
            }
        }
        // ECDSA JWSs (raw r ‖ s signatures, converted to DER by the engine).
        let header = Base64URL.encode(Array(#"{"alg":"ES256","x5c":[]}"#.utf8))
        let payload = Base64URL.encode(Array(#"{"nonce":"AAAA","timestampMs":1893456000000,"ctsProfileMatch":true}"#.utf8))
        put("safetynet-jws", "es256", header + "." + payload + "." + Base64URL.encode([UInt8](repeating: 0x81, count: 64)))
        let header512 = Base64URL.encode(Array(#"{"alg":"ES512"}"#.utf8))
        put("safetynet-jws", "es512", header512 + "." + payload + "." + Base64URL.encode([UInt8](repeating: 0x7f, count: 132)))

        let nonce = Data(Digest.hash(.sha256, parts: [safetyNetAuthenticatorData.bytes, Fixtures.createClientDataHash])).base64EncodedString()
        let timestamp = Int(Fixtures.now.timeIntervalSince1970 * 1000)
        put(
            "safetynet-payload", "valid",
            #"{"nonce":"\#(nonce)","timestampMs":\#(timestamp),"apkPackageName":"com.google.android.gms","ctsProfileMatch":true,"basicIntegrity":true}"#)
        put(
            "safetynet-payload", "cts-false-old",
            #"{"nonce":"\#(nonce)","timestampMs":\#(timestamp - 120_000),"ctsProfileMatch":false,"basicIntegrity":true}"#)
    }

    static func writeTrust() throws {
        var certificates: [(String, X509Certificate)] = [("fuzz-root", Fixtures.authority.root), ("fuzz-safetynet-leaf", Fixtures.safetyNetCertificate)]
        for path in [
            "w3c/w3c-packed-es256.json", "w3c/w3c-tpm-es256.json", "w3c/w3c-android-key-es256.json", "w3c/w3c-apple-es256.json",
            "w3c/w3c-fido-u2f-es256.json",
        ] {
            certificates.append((name(path) + "-leaf", x5c(path)[0]))
        }
        for (name, cert) in certificates { put("x509", name, cert.der) }
        put("x509", "fuzz-root-pem", Fixtures.authority.root.pem)

        let crlFolder = Fixtures.repository.appendingPathComponent("TestVectors/generated/crl")
        let crl = [UInt8](FileManager.default.contents(atPath: crlFolder.appendingPathComponent("ca.crl").path)!)
        put("crl", "generated-ca", crl)
        put("crl", "generated-ca-pem", PEM.text(crl, label: "X509 CRL"))

        // A small BLOB under the fuzz root, and its payload; the production BLOBs are megabytes.
        let aaguid = AAGUID("00112233-4455-6677-8899-aabbccddeeff")!
        let statement = Fixtures.authority.metadataStatement(aaguid: aaguid, description: "Fuzz Authenticator")
        let u2fStatement = Fixtures.authority.metadataStatement(aaguid: nil, description: "Fuzz U2F Key", attestationTypes: ["basic_full"])
        let payload: JSONValue = [
            "legalHeader": "fuzz", "no": 3, "nextUpdate": "2030-02-01",
            "entries": [
                [
                    "aaguid": .string(aaguid.description), "metadataStatement": statement,
                    "statusReports": [["status": "FIDO_CERTIFIED_L1", "effectiveDate": "2024-01-01"], ["status": "REVOKED", "effectiveDate": "2025-06-01"]],
                ],
                [
                    "attestationCertificateKeyIdentifiers": u2fStatement["attestationCertificateKeyIdentifiers"]!, "metadataStatement": u2fStatement,
                    "statusReports": [["status": "FIDO_CERTIFIED", "effectiveDate": "2024-01-01"]],
                ],
            ],
        ]
        put("metadata-blob", "fuzz-blob", try JWSWriter.compact(payload, key: Fixtures.jwsSigner, x5c: [Fixtures.blobCertificate], type: "JWT"))
        put(
            "metadata-blob", "fuzz-blob-with-root",
            try JWSWriter.compact(payload, key: Fixtures.jwsSigner, x5c: [Fixtures.blobCertificate, Fixtures.authority.root]))
        put("metadata-payload", "fuzz-payload", payload.serializedBytes())
        put("metadata-payload", "fuzz-statement", statement.serializedBytes())
        // Two entries of a real BLOB (production no 6), as a payload.
        let blob = [UInt8](
            FileManager.default.contents(atPath: Fixtures.repository.appendingPathComponent("TestVectors/mds/production/fido-mds3-blob-no6.jwt").path)!)
        let trimmed = Array(blob.drop { $0 <= 0x20 }.reversed().drop { $0 <= 0x20 }.reversed())
        let real = try JWS(compact: trimmed, maxSize: 32 << 20).payload
        let entries = (real["entries"]?.arrayValue ?? []).filter { $0["metadataStatement"] != nil }
        let small = entries.filter { $0.serializedBytes().count < 6000 }.prefix(2)
        put(
            "metadata-payload", "production-no6-excerpt",
            JSONValue.object(["no": real["no"]!, "nextUpdate": real["nextUpdate"]!, "entries": .array(Array(small))]).serializedBytes())
    }

    /// Registrations by the software authenticator for the fixed RP, challenge
    /// and origin, one per attestation kind, under the fuzz authority.
    static func generatedRegistrations() throws -> [(String, RegistrationParts)] {
        let authority = Fixtures.authority
        let authenticator = SoftwareAuthenticator(profile: .securityKey)
        func register(_ alg: COSEAlgorithm, _ attestation: SoftwareAuthenticator.Attestation) throws -> RegistrationParts {
            try authenticator.register(
                rpId: Fixtures.rpId, origin: Fixtures.origin, challenge: Fixtures.challenge,
                userHandle: Fixtures.userHandle, algorithm: alg, attestation: attestation)
        }
        var out: [(String, RegistrationParts)] = [
            ("none-es256", try register(.es256, .none)),
            ("none-eddsa", try register(.edDSA, .none)),
            ("packed-self-rs256", try register(.rs256, .packedSelf)),
            ("packed-full-es256", try register(.es256, .packedFull(authority))),
            ("fido-u2f", try register(.es256, .fidoU2F(authority))),
            ("apple", try register(.es256, .apple(authority))),
            ("android-key", try register(.es256, .androidKey(authority))),
            ("tpm-es256", try register(.es256, .tpm(authority))),
            ("tpm-sha1-rs256", try register(.rs256, .tpmSHA1(authority))),
            ("android-safetynet", try register(.es256, .androidSafetyNet(authority))),
        ]
        // compound: packed full and tpm over the same authenticator data.
        var compound = try register(.es256, .packedFull(authority))
        let packed = compound.statement
        try authenticator.restate(&compound, .tpm(authority))
        let tpm = compound.statement
        compound.format = "compound"
        compound.statement = .array([
            .map([CBORPair(.text("fmt"), .text("packed")), CBORPair(.text("attStmt"), packed)]),
            .map([CBORPair(.text("fmt"), .text("tpm")), CBORPair(.text("attStmt"), tpm)]),
        ])
        out.append(("compound-packed-tpm", compound))
        return out
    }

    static func writeCeremonies() throws {
        for (name, parts) in try generatedRegistrations() {
            put("registration-object", name, parts.attestationObject)
            if ["none-es256", "packed-full-es256", "tpm-es256", "android-safetynet", "compound-packed-tpm"].contains(name) {
                put("registration", name, parts.jsonBytes)
            }
        }
        put("registration", "none-es256-conformance-shape", try generatedRegistrations()[0].1.conformanceJSON.serializedBytes())

        let flags: [(String, AuthenticatorFlags, UInt32)] = [
            ("up", [.userPresent], 8), ("up-uv", [.userPresent, .userVerified], 9),
            ("up-uv-be-bs", [.userPresent, .userVerified, .backupEligible, .backupState], 0),
        ]
        for (i, entry) in Fixtures.credentialKeys.enumerated() {
            let (flagName, f, count) = flags[i % flags.count]
            var parts = AssertionParts(
                id: entry.id, clientData: Fixtures.getClientData,
                authenticatorData: AuthenticatorDataParts(rpId: Fixtures.rpId, flags: f, signCount: count, attested: nil),
                signature: [], userHandle: Fixtures.userHandle, attachment: "cross-platform")
            parts.signature = try entry.key.sign(parts.authenticatorData.bytes, Digest.sha256(parts.clientDataJSON))
            put("authentication", "\(entry.key.algorithm)-\(flagName)", parts.jsonBytes)
            if i == 0 { put("authentication", "\(entry.key.algorithm)-conformance-shape", parts.conformanceJSON.serializedBytes()) }
        }
        for (flagName, f, count) in flags {
            put("authentication-data", flagName, AuthenticatorDataParts(rpId: Fixtures.rpId, flags: f, signCount: count, attested: nil).bytes)
        }
        var withExtensions = AuthenticatorDataParts(rpId: Fixtures.rpId, flags: [.userPresent], signCount: 10, attested: nil)
        withExtensions.extensions = .map([CBORPair(.text("credProtect"), CBOR(2)), CBORPair(.text("hmac-secret"), .bool(true))])
        put("authentication-data", "extensions", withExtensions.bytes)
    }
}
