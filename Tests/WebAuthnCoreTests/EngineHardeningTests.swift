import Foundation
import Testing
import WebAuthnTesting
@testable import WebAuthnCore
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

/// Issue 10, hardening the engine: every item here failed (or trapped) before
/// its fix. Checked conversions, degenerate keys, AAGUIDs nobody proved,
/// canonical-equivalence comparisons, and parser cost at the limits.
@Suite("Engine hardening")
struct EngineHardeningTests {
    // MARK: android-safetynet: checked conversions

    /// A SafetyNet statement over `parts` whose JWS the caller shapes: a root, a leaf for
    /// attest.android.com under it, and the nonce bound to the response.
    struct SafetyNetPKI {
        let rootKey: SigningKey
        let root: X509Certificate

        init() throws {
            rootKey = try SigningKey.generate(.es256)
            root = try CertificateBuilder.certificateAuthority(organization: "Hardening", name: "SafetyNet test root")
                .build(key: rootKey, issuer: nil, issuerKey: rootKey)
        }

        func leaf(for key: SigningKey) throws -> X509Certificate {
            var b = CertificateBuilder(subject: [("C", "AA"), ("O", "Hardening"), ("CN", "attest.android.com")])
            b.serial = 2
            return try b.build(key: key, issuer: root, issuerKey: rootKey)
        }

        static func nonce(_ parts: RegistrationParts) -> String {
            Data(Digest.hash(.sha256, parts.authenticatorData.bytes, Digest.sha256(parts.clientDataJSON))).base64EncodedString()
        }

        static func statement(_ jws: [UInt8]) -> CBOR {
            .map([CBORPair(.text("ver"), .text("14366018")), CBORPair(.text("response"), .bytes(jws))])
        }
    }

    func safetyNetHarness() -> Harness {
        Harness(policy: VerificationPolicy(attestation: AttestationPolicy(requireSafetyNetCTSProfileMatch: false)))
    }

    @Test("android-safetynet: an ES256 JWS signature of 252 bytes or more is attestation_signature_invalid, not a UInt8 length trap")
    func safetyNetLongECDSASignature() throws {
        let h = safetyNetHarness()
        let pki = try SafetyNetPKI()
        let leafKey = try SigningKey.generate(.es256)
        let x5c: [JSONValue] = [.string(Data(try pki.leaf(for: leafKey).der).base64EncodedString()), .string(Data(pki.root.der).base64EncodedString())]
        for length in [252, 300, 1000] {
            var parts = try h.register()
            let header: JSONValue = ["alg": "ES256", "x5c": .array(x5c)]
            let payload: JSONValue = [
                "nonce": .string(SafetyNetPKI.nonce(parts)), "timestampMs": .number((h.rp.clock.now().timeIntervalSince1970 * 1000).rounded()),
                "ctsProfileMatch": true,
            ]
            let jws =
                Base64URL.encode(header.serializedBytes()) + "." + Base64URL.encode(payload.serializedBytes()) + "."
                + Base64URL.encode([UInt8](repeating: 0x7f, count: length))
            parts.format = "android-safetynet"
            parts.statement = SafetyNetPKI.statement(Array(jws.utf8))
            #expect(h.verify(parts) == "attestation_signature_invalid", "signature of \(length) bytes")
        }
    }

    @Test("JWS ECDSA signatures convert to DER with long-form lengths; only r ‖ s of the curve's size is accepted")
    func jwsDERSignature() throws {
        let der = JWS.derSignature(r: [UInt8](repeating: 0xff, count: 200), s: [UInt8](repeating: 0x01, count: 200))
        let node = try DER.parse(der)
        let integers = try node.children()
        #expect(node.tag == 0x30 && integers.count == 2 && integers[0].contents.count == 201 && integers[1].contents.count == 200)
        #expect(DER.encodeLength(0x7f) == [0x7f] && DER.encodeLength(0x80) == [0x81, 0x80] && DER.encodeLength(258) == [0x82, 0x01, 0x02])
        #expect(JWS.ecdsaSignatureSizes == [.es256: 64, .es384: 96, .es512: 132])
    }

    @Test("android-safetynet: a timestampMs of 1e300, -1e300 or 1.5 is attestation_timestamp_invalid, not an Int64 trap")
    func safetyNetHugeTimestamp() throws {
        let h = safetyNetHarness()
        let pki = try SafetyNetPKI()
        let leafKey = try SigningKey.generate(.rs256)
        let leaf = try pki.leaf(for: leafKey)
        for timestamp in [1e300, -1e300, 1.5, 9.3e18] {
            var parts = try h.register()
            let payload: JSONValue = ["nonce": .string(SafetyNetPKI.nonce(parts)), "timestampMs": .number(timestamp), "ctsProfileMatch": true]
            parts.format = "android-safetynet"
            parts.statement = SafetyNetPKI.statement(try JWSWriter.compact(payload, key: leafKey, x5c: [leaf, pki.root]))
            #expect(h.verify(parts) == "attestation_timestamp_invalid", "timestampMs \(timestamp)")
        }
        // The same JWS with a fresh timestamp verifies: the statement is otherwise valid.
        var parts = try h.register()
        let fresh: JSONValue = [
            "nonce": .string(SafetyNetPKI.nonce(parts)), "timestampMs": .number((h.rp.clock.now().timeIntervalSince1970 * 1000).rounded()),
            "ctsProfileMatch": true,
        ]
        parts.format = "android-safetynet"
        parts.statement = SafetyNetPKI.statement(try JWSWriter.compact(fresh, key: leafKey, x5c: [leaf, pki.root]))
        #expect(h.verify(parts) == nil)
    }

    @Test("X.509: a version INTEGER of 2^63 − 1 reads as version 0 (or fails to parse), never overflows")
    func hugeCertificateVersion() throws {
        let key = try SigningKey.generate(.es256)
        let der = try CertificateBuilder(subject: [("CN", "version")]).build(key: key, issuer: nil, issuerKey: key).der
        let certificate = try DER.parse(der).children()  // tbsCertificate, signatureAlgorithm, signature
        var tbs = try certificate[0].children()
        #expect(tbs[0].tag == 0xA0)
        tbs.removeFirst()
        let version = DERWriter.tlv(0xA0, DERWriter.tlv(0x02, [0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]))
        let body = version + tbs.flatMap { [$0.tag] + DERWriter.length($0.contents.count) + Array($0.value) }
        let forged = DERWriter.tlv(
            0x30, DERWriter.tlv(0x30, body) + certificate[1...].flatMap { [$0.tag] + DERWriter.length($0.contents.count) + Array($0.value) })
        if let parsed = try? X509Certificate(der: forged) {
            #expect(parsed.version == 0)
        }
    }

    // MARK: Degenerate keys

    static func okpKey(curve: Int, alg: Int = -8, x: [UInt8]) -> [UInt8] {
        CBOREncoder.encode(.map([CBORPair(CBOR(1), CBOR(1)), CBORPair(CBOR(3), CBOR(alg)), CBORPair(CBOR(-1), CBOR(curve)), CBORPair(CBOR(-2), .bytes(x))]))
    }

    static func rsaKey(n: [UInt8], e: [UInt8] = [1, 0, 1]) -> [UInt8] {
        CBOREncoder.encode(.map([CBORPair(CBOR(1), CBOR(3)), CBORPair(CBOR(3), CBOR(-257)), CBORPair(CBOR(-1), .bytes(n)), CBORPair(CBOR(-2), .bytes(e))]))
    }

    @Test("Ed25519: the identity point, whose one signature (R = identity, S = 0) verifies every message, is public_key_small_order")
    func ed25519Identity() throws {
        let identity = [UInt8]([1]) + [UInt8](repeating: 0, count: 31)
        #expect(errorCode { _ = try COSEKey(bytes: Self.okpKey(curve: 6, x: identity)) } == "public_key_small_order")
        #expect(errorCode { _ = try PublicKey.okp(curve: .ed25519, x: identity) } == "public_key_small_order")
        // Every small-order encoding, with either sign bit, including the non-canonical p and p + 1.
        for encoding in KeySanity.ed25519SmallOrder {
            for sign: UInt8 in [0, 0x80] {
                let x = encoding.dropLast() + [encoding[31] | sign]
                #expect(errorCode { _ = try COSEKey(bytes: Self.okpKey(curve: 6, alg: -19, x: Array(x))) } == "public_key_small_order", "\(Bytes.hex(x))")
            }
        }
        // A real key still imports and verifies.
        let key = try SigningKey.generate(.edDSA)
        let cose = try COSEKey(bytes: CBOREncoder.encode(try key.coseKey()))
        #expect(cose.publicKey.verify(signature: try key.sign([1, 2, 3]), over: [1, 2, 3], algorithm: .edDSA))
    }

    @Test("Ed448: the identity and the other small-order points are public_key_small_order")
    func ed448SmallOrder() throws {
        for encoding in KeySanity.ed448SmallOrder {
            for sign: UInt8 in [0, 0x80] {
                let x = encoding.dropLast() + [encoding[56] | sign]
                #expect(errorCode { _ = try COSEKey(bytes: Self.okpKey(curve: 7, x: Array(x))) } == "public_key_small_order", "\(Bytes.hex(x))")
            }
        }
        let key = try SigningKey.generate(.ed448)
        #expect(errorCode { _ = try COSEKey(bytes: CBOREncoder.encode(try key.coseKey())) } == nil)
    }

    @Test("RSA: an even modulus, a 2041-bit modulus and an even or unit exponent are public_key_rsa_invalid")
    func rsaKeySanity() throws {
        let real = try SigningKey.generate(.rs256).coseKey()
        let n = real[-1]!.bytesValue!, e = real[-2]!.bytesValue!
        #expect(n.count == 256 && errorCode { _ = try COSEKey(bytes: Self.rsaKey(n: n, e: e)) } == nil)
        var even = n
        even[even.count - 1] &= 0xfe
        #expect(errorCode { _ = try COSEKey(bytes: Self.rsaKey(n: even)) } == "public_key_rsa_invalid")
        var short = n  // 256 bytes, but only 2041 bits
        short[0] = 0x01
        #expect(errorCode { _ = try COSEKey(bytes: Self.rsaKey(n: short)) } == "public_key_rsa_invalid")
        #expect(errorCode { _ = try COSEKey(bytes: Self.rsaKey(n: n, e: [1, 0, 0])) } == "public_key_rsa_invalid")
        #expect(errorCode { _ = try COSEKey(bytes: Self.rsaKey(n: n, e: [1])) } == "public_key_rsa_invalid")
        #expect(errorCode { _ = try COSEKey(bytes: Self.rsaKey(n: n, e: [3])) } == nil)
        #expect(errorCode { _ = try COSEKey(bytes: Self.rsaKey(n: [UInt8](repeating: 0xff, count: 1025))) } == "public_key_rsa_invalid")
    }

    @Test("EC: a point off the curve, and the point at infinity in a SubjectPublicKeyInfo, are refused")
    func ecPointSanity() throws {
        #expect(errorCode { _ = try COSEKey(bytes: HostileInputTests.ec2(y: [UInt8](repeating: 1, count: 32))) } == "public_key_point_invalid")
        // SubjectPublicKeyInfo of id-ecPublicKey / prime256v1 whose point is 0x00, the point at infinity.
        let infinity: [UInt8] = [
            0x30, 0x19, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d,
            0x03, 0x01, 0x07, 0x03, 0x02, 0x00, 0x00,
        ]
        #expect(errorCode { _ = try PublicKey.fromSubjectPublicKeyInfo(infinity) } == "public_key_point_invalid")
        let real = try SigningKey.generate(.es256)
        #expect(errorCode { _ = try COSEKey(bytes: CBOREncoder.encode(try real.coseKey())) } == nil)
    }

    // MARK: AAGUIDs: verified only through the entry's own roots

    /// A relying party with `authority`'s root as the android-key and packed format roots
    /// (standing in for Google's roots), metadata for `aaguid` with `entryRoots`, and `policy`.
    func aaguidHarness(
        aaguid: [UInt8], authority: AttestationAuthority, entryRoots: [X509Certificate], formatRoots: Bool = true,
        policy: AttestationPolicy
    ) throws -> Harness {
        var profile = SoftwareAuthenticator.Profile.securityKey
        profile.aaguid = aaguid
        var h = Harness(profile: profile)
        let entry = MetadataEntry(
            aaguid: AAGUID(bytes: aaguid), description: "claimed model", attestationTypes: ["basic_full", "basic_surrogate"],
            attestationRootCertificates: entryRoots)
        let anchors = TrustAnchors(formatRoots: formatRoots ? ["android-key": [authority.root], "packed": [authority.root]] : [:], metadata: [entry])
        h.rp = try RelyingParty(
            id: h.rp.id, origins: h.rp.origins, policy: VerificationPolicy(algorithms: COSEAlgorithm.supported, attestation: policy),
            clock: h.rp.clock, trustAnchors: anchors)
        return h
    }

    @Test("android-key: a chain to the format's roots does not verify the AAGUID: the allow-list refuses it, and its metadata is not attached")
    func androidKeyAAGUIDUnproven() throws {
        let authority = try AttestationAuthority.generate()
        let other = try AttestationAuthority.generate(name: "the claimed model's own root")
        let aaguid = [UInt8](repeating: 0x42, count: 16)
        let allow = AttestationPolicy(allowedAAGUIDs: [AAGUID(bytes: aaguid)!])
        let h = try aaguidHarness(aaguid: aaguid, authority: authority, entryRoots: [other.root], policy: allow)
        #expect(h.verify(try h.register(attestation: .androidKey(authority))) == "aaguid_unverified")
        // Without an allow-list it registers, trusted through the format roots, with no metadata attached.
        let lax = try aaguidHarness(aaguid: aaguid, authority: authority, entryRoots: [other.root], policy: AttestationPolicy())
        let result = try RegistrationVerifier.verify(
            try lax.register(attestation: .androidKey(authority)).response, ceremony: lax.registrationCeremony(), relyingParty: lax.rp)
        #expect(result.trust.trusted && result.trust.metadata == nil)
        #expect(result.trust.reason.contains("not verified"))
    }

    @Test("allowedAAGUIDs admits only verified AAGUIDs: none and self attestation are aaguid_unverified; deniedAAGUIDs still refuses a claim")
    func noneAndSelfUnverified() throws {
        let authority = try AttestationAuthority.generate()
        let aaguid = [UInt8](repeating: 0x43, count: 16)
        let id = AAGUID(bytes: aaguid)!
        let allow = try aaguidHarness(aaguid: aaguid, authority: authority, entryRoots: [authority.root], policy: AttestationPolicy(allowedAAGUIDs: [id]))
        #expect(allow.verify(try allow.register(attestation: .none)) == "aaguid_unverified")
        #expect(allow.verify(try allow.register(attestation: .packedSelf)) == "aaguid_unverified")
        let deny = try aaguidHarness(aaguid: aaguid, authority: authority, entryRoots: [authority.root], policy: AttestationPolicy(deniedAAGUIDs: [id]))
        #expect(deny.verify(try deny.register(attestation: .none)) == "aaguid_not_allowed")
        #expect(deny.verify(try deny.register(attestation: .packedSelf)) == "aaguid_not_allowed")
        // Self attestation never carries the claimed model's metadata.
        let lax = try aaguidHarness(aaguid: aaguid, authority: authority, entryRoots: [authority.root], policy: AttestationPolicy())
        let result = try RegistrationVerifier.verify(
            try lax.register(attestation: .packedSelf).response, ceremony: lax.registrationCeremony(), relyingParty: lax.rp)
        #expect(result.attestationType == .self && result.trust.metadata == nil)
    }

    @Test("a chain to a root of the AAGUID's own metadata entry verifies it: allowed, trusted, metadata attached")
    func aaguidProvenByEntryRoots() throws {
        let authority = try AttestationAuthority.generate()
        let aaguid = [UInt8](repeating: 0x44, count: 16)
        let id = AAGUID(bytes: aaguid)!
        let h = try aaguidHarness(
            aaguid: aaguid, authority: authority, entryRoots: [authority.root], formatRoots: false,
            policy: AttestationPolicy(requireTrustedAttestation: true, allowedAAGUIDs: [id]))
        let result = try RegistrationVerifier.verify(
            try h.register(attestation: .packedFull(authority)).response, ceremony: h.registrationCeremony(), relyingParty: h.rp)
        #expect(result.trust.trusted && result.trust.metadata?.aaguid == id)
        // The same chain through the format roots only proves nothing about the model.
        let formatOnly = try aaguidHarness(aaguid: aaguid, authority: authority, entryRoots: [], policy: AttestationPolicy(allowedAAGUIDs: [id]))
        #expect(formatOnly.verify(try formatOnly.register(attestation: .packedFull(authority))) == "aaguid_unverified")
    }

    // MARK: Comparisons

    @Test("origins compare as UTF-8 bytes: U+212A KELVIN SIGN is not K")
    func kelvinOrigin() throws {
        let configured = "android:apk-key-hash:Kx8"
        let kelvin = "android:apk-key-hash:\u{212A}x8"
        #expect(kelvin == configured)  // Swift's String == says canonically equivalent
        var h = Harness(origins: [configured])
        h.rp = try RelyingParty(
            id: h.rp.id, origins: [configured], policy: VerificationPolicy(crossOrigin: .allowTopOrigins(["https://K.example"])),
            clock: h.rp.clock)
        var parts = try h.register()
        parts.clientData.origin = configured
        #expect(h.verify(parts) == nil)
        parts.clientData.origin = kelvin
        #expect(h.verify(parts) == "origin_not_allowed")
        parts.clientData.origin = configured
        parts.clientData.crossOrigin = true
        parts.clientData.topOrigin = "https://\u{212A}.example"
        #expect(h.verify(parts) == "top_origin_not_allowed")
        // JSON member names are looked up by bytes too.
        let json = try JSONValue.parse(#"{"\u212Aey":1}"#)
        #expect(json["Key"] == nil && json["\u{212A}ey"] == .number(1))
    }

    @Test("typed WebAuthn values compare and hash as UTF-8 bytes: canonically equivalent is not equal")
    func typedValuesCompareBytes() throws {
        func check<T: RawRepresentable & Hashable & CustomStringConvertible>(_ type: T.Type) where T.RawValue == String {
            // KELVIN SIGN and K, é composed and decomposed, ANGSTROM SIGN and Å: each pair is one string to Swift's ==.
            for (a, b) in [("\u{212A}", "K"), ("inte\u{301}rnal", "int\u{e9}rnal"), ("\u{212B}", "\u{c5}")] {
                #expect(a == b)
                let x = T(rawValue: a)!, y = T(rawValue: b)!
                #expect(x != y, "\(type): \(Array(a.utf8)) and \(Array(b.utf8)) are different values")
                var counts: [T: Int] = [:]
                counts[x, default: 0] += 1
                counts[y, default: 0] += 1
                #expect(Set([x, y]).count == 2 && counts.count == 2 && counts[x] == 1 && counts[y] == 1)
                #expect(x == T(rawValue: a)! && x.hashValue == T(rawValue: a)!.hashValue)
                #expect(x.rawValue.utf8.elementsEqual(a.utf8) && x.description.utf8.elementsEqual(a.utf8))  // kept as given
            }
        }
        check(ResidentKeyRequirement.self)
        check(AuthenticatorAttachment.self)
        check(AttestationConveyancePreference.self)
        check(PublicKeyCredentialHint.self)
        check(AuthenticatorTransport.self)
        check(AttestationFormat.self)
        #expect(AuthenticatorTransport(rawValue: "smart-card") == .smartCard && AttestationFormat(rawValue: "fido-u2f") == .fidoU2F)
    }

    @Test("a user handle mismatch names no user handle in its message")
    func userHandleMismatchMessages() throws {
        let h = Harness()
        let credential = try h.registered()
        var parts = try h.assert(credential)
        let other: [UInt8] = Array("someone-else".utf8)
        parts.userHandle = other
        for ceremony in [h.authenticationCeremony(userHandle: h.user.id), h.authenticationCeremony()] {
            do {
                _ = try AuthenticationVerifier.verify(parts.response, ceremony: ceremony, credential: credential, relyingParty: h.rp)
                Issue.record("the mismatch was accepted")
            } catch {
                #expect(error.code == .userHandleMismatch)
                for handle in [h.user.id, other] {
                    #expect(!error.message.contains(Base64URL.encode(handle)) && !error.description.contains(Base64URL.encode(handle)))
                }
            }
        }
    }

    @Test("WebAuthnError equality is by code only")
    func errorEquality() {
        #expect(WebAuthnError(.signatureInvalid, "one message") == WebAuthnError(.signatureInvalid, "another", step: "x"))
        #expect(WebAuthnError(.signatureInvalid, "same") != WebAuthnError(.challengeMismatch, "same"))
    }

    @Test("CBOR: NaN map keys (which would escape the duplicate check) are cbor_malformed")
    func cborNaNKeys() {
        let nan: [UInt8] = [0xf9, 0x7e, 0x00]  // half-precision NaN
        #expect(errorCode { _ = try CBORDecoder.decode([0xa2] + nan + [0x01] + nan + [0x02]) } == "cbor_malformed")
        #expect(errorCode { _ = try CBORDecoder.decode([0xa1] + nan + [0x01]) } == "cbor_malformed")
    }

    // MARK: Limits

    @Test("the default JSON body limit is 64 KiB")
    func bodyLimit() {
        #expect(JSONLimits().maxBytes == 64 * 1024)
        let body = "[" + String(repeating: " ", count: 64 * 1024) + "]"
        #expect(errorCode { _ = try RegistrationResponse(json: Array(body.utf8)) } == "input_too_large")
    }
}
