import Foundation
import Testing
import WebAuthnTesting
@testable import WebAuthnCore
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

/// Certificate paths, CRLs, FIDO metadata and the trust policy (WebAuthn L3 §7.1 steps 24–25).
@Suite("Trust: certificate paths, FIDO metadata, policy")
struct TrustTests {
    static let time2030 = Date(timeIntervalSince1970: 1_893_456_000)

    static func pem(_ path: String) -> X509Certificate {
        try! X509Certificate(pem: String(decoding: FileManager.default.contents(atPath: Vectors.root.appendingPathComponent(path).path)!, as: UTF8.self))
    }
    static func bytes(_ path: String) -> [UInt8] {
        [UInt8](FileManager.default.contents(atPath: Vectors.root.appendingPathComponent(path).path)!)
    }

    // MARK: Certificate paths

    @Test("a chain is trusted only through a configured anchor, never through x5c")
    func anchors() {
        let f = W3CFixture("w3c-packed-es256.json")
        let leaf = try! X509Certificate(der: f.statement["x5c"]!.arrayValue![0].bytesValue!)
        let ca = W3CVectorTests.attestationCA
        guard case .trusted(let path) = CertificateChain.validate([leaf], anchors: [ca], at: Self.time2030) else {
            Issue.record("the W3C chain should validate"); return
        }
        #expect(path.count == 2 && path.last?.fingerprint == ca.fingerprint)
        // The root sent in x5c is not an anchor.
        guard case .untrusted(let e) = CertificateChain.validate([leaf, ca], anchors: [], at: Self.time2030) else { Issue.record(); return }
        #expect(e.code == .attestationUntrusted)
        guard case .untrusted(let e2) = CertificateChain.validate([leaf, ca], anchors: [Self.pem("mds/roots/apple-webauthn-root-ca.pem")], at: Self.time2030)
        else { Issue.record(); return }
        #expect(e2.code == .attestationUntrusted)
        // Time is the engine's: before the CA's validity.
        guard case .untrusted(let e3) = CertificateChain.validate([leaf], anchors: [ca], at: Date(timeIntervalSince1970: 1_600_000_000)) else {
            Issue.record(); return
        }
        #expect(e3.code == .certificateExpired)
        // Length bound.
        guard case .untrusted(let e4) = CertificateChain.validate(Array(repeating: leaf, count: 9), anchors: [ca], at: Self.time2030) else {
            Issue.record(); return
        }
        #expect(e4.message.contains("at most"))
    }

    @Test("anchors that share a name are each tried for a certificate without an authority key identifier")
    func anchorsSharingAName() throws {
        // Re-check of round 28 (N10): OpenSSL took the first anchor of the issuer's name, and a
        // genuine chain to the second of two roots so named (a root re-keyed under its old name)
        // was refused with a signature failure.
        let keys = try (0..<3).map { _ in try SigningKey.generate(.es256) }
        let roots = try keys.prefix(2).map {
            try CertificateBuilder.certificateAuthority(organization: "Vendor", name: "Vendor root").build(key: $0, issuer: nil, issuerKey: $0)
        }
        let leafKey = try SigningKey.generate(.es256)
        let template = CertificateBuilder(subject: [("O", "Vendor"), ("CN", "attestation")])
        let leaf = try template.build(key: leafKey, issuer: roots[1], issuerKey: keys[1])
        for anchors in [roots, roots.reversed(), [roots[0], TrustTests.pem("mds/roots/apple-webauthn-root-ca.pem"), roots[1]]] {
            guard case .trusted(let path) = CertificateChain.validate([leaf], anchors: anchors, at: Self.time2030) else {
                Issue.record("the chain to the second root should validate"); continue
            }
            #expect(path.last?.fingerprint == roots[1].fingerprint)
        }
        // A certificate under that name that none of them signed is still refused.
        let forged = try template.build(key: leafKey, issuer: roots[0], issuerKey: keys[2])
        guard case .untrusted(let error) = CertificateChain.validate([forged], anchors: roots, at: Self.time2030) else {
            Issue.record("a certificate no anchor signed was trusted"); return
        }
        #expect(error.code == .attestationUntrusted && error.message.contains("signature"), "\(error.message)")
        // With CRLs, the first attempt fails on the CRL the right root signed (the re-check): the
        // retry still finds the right root, and a revocation there is reported as such.
        let crl = try CertificateRevocationList(der: CRLBuilder().build(issuer: roots[1], issuerKey: keys[1]))
        guard case .trusted = CertificateChain.validate([leaf], anchors: roots, crls: [crl], at: Self.time2030) else {
            Issue.record("the chain to the second root should validate with its CRL"); return
        }
        let revoking = try CertificateRevocationList(der: CRLBuilder(revoking: [1]).build(issuer: roots[1], issuerKey: keys[1]))
        guard case .untrusted(let revoked) = CertificateChain.validate([leaf], anchors: roots, crls: [revoking], at: Self.time2030) else {
            Issue.record("a revoked leaf was trusted"); return
        }
        #expect(revoked.code == .certificateRevoked, "\(revoked.message)")
        // The right root expired: that is the verdict, not the wrong root's signature failure.
        var expiring = CertificateBuilder.certificateAuthority(organization: "Vendor", name: "Vendor root")
        expiring.notAfter = Date(timeIntervalSince1970: 1_800_000_000)
        let expired = try expiring.build(key: keys[1], issuer: nil, issuerKey: keys[1])
        guard case .untrusted(let late) = CertificateChain.validate([leaf], anchors: [roots[0], expired], at: Self.time2030) else {
            Issue.record("a chain to an expired root was trusted"); return
        }
        #expect(late.code == .certificateExpired, "\(late.message)")
    }

    @Test("a chain with a weak link is not trusted: SHA-1 or MD5 signatures, RSA keys under 2048 bits, at any place in the chain")
    func weakChains() throws {
        // Red team, round 26: each of these was trusted, where the engine refuses the same
        // weaknesses in credential keys (RSA under 2048 bits, RS1 by default).
        func outcome(_ chain: [String], _ root: String) -> CertificateChain.Outcome {
            CertificateChain.validate(chain.map { Self.pem("generated/weak/\($0).pem") }, anchors: [Self.pem("generated/weak/\(root).pem")], at: Self.time2030)
        }
        guard case .trusted = outcome(["leaf-sha256"], "root-p256") else { Issue.record("the control chain should validate"); return }
        for (chain, root) in [
            (["leaf-sha1"], "root-p256"), (["leaf-md5"], "root-rsa2048"), (["leaf-sha1-rsa"], "root-rsa2048"),
            (["leaf-under-rsa1024"], "root-rsa1024"), (["leaf-under-inter", "inter-rsa1024"], "root-p256"),
        ] {
            guard case .untrusted(let error) = outcome(chain, root) else { Issue.record("\(chain) under \(root) was trusted"); continue }
            #expect(error.code == .attestationUntrusted, "\(chain): \(error)")
        }
    }

    @Test("a CRL supplied with the anchors revokes")
    func crl() throws {
        let ca = Self.pem("generated/crl/ca.pem")
        let crl = try CertificateRevocationList(der: Self.bytes("generated/crl/ca.crl"))
        guard case .untrusted(let e) = CertificateChain.validate([Self.pem("generated/crl/revoked.pem")], anchors: [ca], crls: [crl], at: Self.time2030) else {
            Issue.record("revoked certificate accepted"); return
        }
        #expect(e.code == .certificateRevoked)
        guard case .trusted = CertificateChain.validate([Self.pem("generated/crl/good.pem")], anchors: [ca], crls: [crl], at: Self.time2030) else {
            Issue.record("good certificate refused"); return
        }
        guard case .trusted = CertificateChain.validate([Self.pem("generated/crl/revoked.pem")], anchors: [ca], at: Self.time2030) else {
            Issue.record("without the CRL the chain is valid"); return
        }
        #expect(errorCode { _ = try CertificateRevocationList(der: [1, 2, 3]) } == "configuration_invalid")
    }

    @Test("step 25: a packed attestation whose certificate a configured CRL revokes is refused, also when untrusted attestation is accepted")
    func registrationRevoked() throws {
        // Mutation testing: with the refusal of a revoked chain removed from step 25, registrations
        // still passed (expiry is checked elsewhere; revocation was not, without a trust policy).
        let caKey = try SigningKey.generate(.es256), leafKey = try SigningKey.generate(.es256)
        let ca = try CertificateBuilder.certificateAuthority(organization: "WebAuthn Testing", name: "Revoking CA").build(
            key: caKey, issuer: nil, issuerKey: caKey)
        let aaguid = SoftwareAuthenticator.Profile.securityKey.aaguid
        var leafBuilder = CertificateBuilder(subject: [("C", "AA"), ("O", "WebAuthn Testing"), ("OU", "Authenticator Attestation"), ("CN", "Revoked")])
        leafBuilder.serial = 4242
        leafBuilder.extensions = [
            (X509Certificate.OID.basicConstraints, true, DERWriter.basicConstraintsCAFalse),
            (X509Certificate.OID.fidoGenCeAAGUID, false, DERWriter.aaguid(aaguid)),
        ]
        let leaf = try leafBuilder.build(key: leafKey, issuer: ca, issuerKey: caKey)
        for (revoking, expected) in [([UInt64](), nil), ([4242], "certificate_revoked")] as [([UInt64], String?)] {
            let crl = try CertificateRevocationList(der: CRLBuilder(revoking: revoking).build(issuer: ca, issuerKey: caKey))
            var h = Harness(profile: .securityKey)
            h.rp = try RelyingParty(
                id: "example.com", origins: [Harness.origin], clock: .fixed(Self.time2030),
                trustAnchors: TrustAnchors(formatRoots: [.packed: [ca]], crls: [crl]))
            #expect(!h.rp.policy.attestation.requireTrustedAttestation)
            let parts = try h.register(attestation: .packed(x5c: [leaf.der], signer: AttestationSigner(key: leafKey)))
            #expect(h.verify(parts) == expected, "revoking \(revoking)")
        }
    }

    @Test("CRLs issued with CRLBuilder revoke what they list, and read as PEM or DER; a broken PEM CRL is a typed error")
    func issuedCRL() throws {
        let caKey = try SigningKey.generate(.es256), leafKey = try SigningKey.generate(.es256)
        var caBuilder = CertificateBuilder(subject: [("CN", "CRL test CA")])
        caBuilder.extensions = [(X509Certificate.OID.basicConstraints, true, [0x30, 0x03, 0x01, 0x01, 0xff])]
        let ca = try caBuilder.build(key: caKey, issuer: nil, issuerKey: caKey)
        var leafBuilder = CertificateBuilder(subject: [("CN", "leaf")])
        leafBuilder.serial = 77
        let leaf = try leafBuilder.build(key: leafKey, issuer: ca, issuerKey: caKey)
        let der = try CRLBuilder(revoking: [77]).build(issuer: ca, issuerKey: caKey)
        let pem = "-----BEGIN X509 CRL-----\n" + Data(der).base64EncodedString(options: .lineLength64Characters) + "\n-----END X509 CRL-----\n"
        for crl in [try CertificateRevocationList(derOrPEM: der), try CertificateRevocationList(derOrPEM: Array(pem.utf8))] {
            guard case .untrusted(let e) = CertificateChain.validate([leaf], anchors: [ca], crls: [crl], at: Self.time2030) else {
                Issue.record("a revoked certificate was accepted"); continue
            }
            #expect(e.code == .certificateRevoked)
        }
        let empty = try CertificateRevocationList(der: CRLBuilder().build(issuer: ca, issuerKey: caKey))
        guard case .trusted = CertificateChain.validate([leaf], anchors: [ca], crls: [empty], at: Self.time2030) else {
            Issue.record("a CRL that lists nothing revoked the certificate"); return
        }
        for broken in [
            "-----BEGIN X509 CRL-----\nAAAA", "-----BEGIN X509 CRL-----\n!!\n-----END X509 CRL-----", "-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----",
        ] {
            #expect(errorCode { _ = try CertificateRevocationList(derOrPEM: Array(broken.utf8)) } == "configuration_invalid", "\(broken)")
        }
    }

    @Test("registration: an untrusted chain is reported, and refused when trust is required; expired always fails")
    func registrationTrust() throws {
        let f = W3CFixture("w3c-packed-es256.json")
        let untrusted = try f.verify(anchors: .builtIn)
        #expect(!untrusted.trust.trusted && untrusted.riskSignals.contains(.attestationUntrusted))
        #expect(f.code({ $0.attestation.requireTrustedAttestation = true }, anchors: .builtIn) == "attestation_untrusted")
        #expect(try f.verify { $0.attestation.requireTrustedAttestation = true }.trust.trusted)
        var expired = f
        var b = CertificateBuilder(subject: [("C", "AA"), ("O", "W3C"), ("OU", "Authenticator Attestation"), ("CN", "expired")])
        b.notAfter = Date(timeIntervalSince1970: 1_750_000_000)
        b.extensions = [(X509Certificate.OID.basicConstraints, true, D.basicConstraintsCAFalse)]
        expired.set("x5c", .array([.bytes(f.issue(b, key: f.attestationKey))]))
        #expect(expired.code() == "certificate_expired")
    }

    @Test("a certificate's subject is shown with its values escaped (RFC 4514): one attribute cannot pass for several")
    func subjectEscaped() throws {
        // Red team, sixteenth pass: a single CN of "Evil, O=Yubico AB, C=SE" was shown as
        // "…, CN=Evil, O=Yubico AB, C=SE", a Yubico subject to the eye; bidi controls went out raw.
        let key = try SigningKey.generate(.es256)
        let cert = try CertificateBuilder(subject: [("O", "RT"), ("CN", "Evil, O=Yubico AB, C=SE")]).build(key: key, issuer: nil, issuerKey: key)
        #expect(cert.subjectSummary == #"O=RT, CN=Evil\, O\=Yubico AB\, C\=SE"# && cert.issuerSummary == cert.subjectSummary)
        // A type OpenSSL has no name for is shown by its dotted OID (it read UNDEF).
        let unknown = try CertificateBuilder(subject: [("1.3.6.1.4.1.99999.7", "x"), ("CN", "y")]).build(key: key, issuer: nil, issuerKey: key)
        #expect(unknown.subjectSummary == "1.3.6.1.4.1.99999.7=x, CN=y", "\(unknown.subjectSummary)")
        #expect(X509Certificate.escapedDNValue("\u{202E}gro\u{1B}") == #"\E2\80\AEgro\1B"#)
        // Fillers and variation selectors too (they show as nothing): re-check of the sixteenth pass.
        #expect(X509Certificate.escapedDNValue("a\u{3164}b\u{FE0F}") == #"a\E3\85\A4b\EF\B8\8F"#)
        #expect(X509Certificate.escapedDNValue(" #a+b\"c\\d<e>f;g ") == #"\ #a\+b\"c\\d\<e\>f\;g\ "#)
        #expect(
            X509Certificate.escapedDNValue("#lead") == ##"\#lead"##
                && X509Certificate.escapedDNValue("Yubico U2F Root CA Serial 457200631") == "Yubico U2F Root CA Serial 457200631")
    }

    @Test("an expired or not yet valid certificate of a chain is reported with its own bound, then the time it was checked at")
    func expiryMessages() throws {
        // Red team, sixteenth pass: "certificate has expired at <the verification time>".
        let key = try SigningKey.generate(.es256)
        let ca = try CertificateBuilder.certificateAuthority(organization: "T", name: "CA").build(key: key, issuer: nil, issuerKey: key)
        var b = CertificateBuilder(subject: [("CN", "leaf")])
        b.notBefore = Date(timeIntervalSince1970: 1_720_000_000)
        b.notAfter = Date(timeIntervalSince1970: 1_750_000_000)
        let leaf = try b.build(key: key, issuer: ca, issuerKey: key)
        for (time, expected) in [
            (Date(timeIntervalSince1970: 1_760_000_000), "the attestation certificate expired at 2025-06-15T15:06:40Z; the time is 2025-10-09T08:53:20Z"),
            (
                Date(timeIntervalSince1970: 1_710_000_000),
                "the attestation certificate is not valid before 2024-07-03T09:46:40Z; the time is 2024-03-09T16:00:00Z"
            ),
        ] {
            guard case .untrusted(let error) = CertificateChain.validate([leaf], anchors: [ca], at: time) else {
                Issue.record("validated at \(time)")
                continue
            }
            #expect(error.code.rawValue == "certificate_expired" && error.message == expected, "\(error.message)")
        }
    }

    @Test("policy: AAGUID allow and deny lists, accepted attestation types")
    func aaguidLists() throws {
        let f = W3CFixture("w3c-packed-es256.json")
        let aaguid = AAGUID(bytes: f.aaguid)!
        #expect(f.code { $0.attestation.deniedAAGUIDs = [aaguid] } == "aaguid_not_allowed")
        #expect(f.code { $0.attestation.allowedAAGUIDs = [AAGUID.zero] } == "aaguid_not_allowed")
        // The W3C CA is a format root here: it vouches for no model, so the allow-list
        // admits the AAGUID only when that AAGUID's metadata entry holds the root.
        #expect(f.code { $0.attestation.allowedAAGUIDs = [aaguid] } == "aaguid_unverified")
        let metadata = TrustAnchors(metadata: [
            MetadataEntry(
                aaguid: aaguid, description: "W3C packed ES256", attestationTypes: ["basic_full"],
                attestationRootCertificates: [W3CVectorTests.attestationCA])
        ])
        #expect(f.code({ $0.attestation.allowedAAGUIDs = [aaguid] }, anchors: metadata) == nil)
        #expect(f.code { $0.attestation.acceptedTypes = [.none, .self] } == "attestation_type_not_allowed")
    }

    // MARK: FIDO metadata

    @Test("a production BLOB verifies at its time, against the FIDO MDS root, with its CRLs")
    func productionBLOB() throws {
        let at = Vectors.date(.string("2024-08-31T12:00:00Z"))!
        let crls = try ["mds/crl/globalsign-root-r3.crl", "mds/crl/globalsign-ev-sha256-g3.crl"].map { try CertificateRevocationList(der: Self.bytes($0)) }
        let blob = try FIDOMetadata.blob(jwt: Self.bytes("mds/production/fido-mds3-blob-no85.jwt"), at: at, options: .init(x509Roots: nil, crls: crls))
        #expect(blob.serial == 85)
        #expect(blob.entries.count > 200)
        #expect(blob.entries.contains { $0.description == "Security Key by Yubico with NFC" })
        let small = try FIDOMetadata.load(
            path: Vectors.root.appendingPathComponent("mds/production/fido-mds3-blob-no6.jwt").path, at: Vectors.date(.string("2021-08-25T00:00:00Z"))!)
        #expect(small.serial == 6 && small.entries.count + small.skipped == 79)
    }

    @Test("a BLOB is refused when stale, older, expired, tampered, unsigned or from another root")
    func blobFailures() throws {
        let jwt = Self.bytes("mds/production/fido-mds3-blob-no6.jwt")
        let good = Vectors.date(.string("2021-08-25T00:00:00Z"))!
        #expect(errorCode { _ = try FIDOMetadata.blob(jwt: jwt, at: Vectors.date(.string("2021-09-05T00:00:00Z"))!) } == "metadata_stale")
        #expect(
            errorCode { _ = try FIDOMetadata.blob(jwt: jwt, at: Vectors.date(.string("2021-09-05T00:00:00Z"))!, options: .init(refuseStale: false)) } == nil)
        #expect(errorCode { _ = try FIDOMetadata.blob(jwt: jwt, at: good, options: .init(minimumSerial: 7)) } == "metadata_stale")
        #expect(
            errorCode { _ = try FIDOMetadata.blob(jwt: jwt, at: Vectors.date(.string("2022-05-15T19:57:24Z"))!, options: .init(refuseStale: false)) }
                == "metadata_untrusted")
        #expect(
            errorCode { _ = try FIDOMetadata.blob(jwt: jwt, at: good, options: .init(x509Roots: [Self.pem("mds/conformance/fido-conformance-mds3-root.pem")])) }
                == "metadata_untrusted")
        let dots = jwt.indices.filter { jwt[$0] == UInt8(ascii: ".") }
        func flipped(_ i: Int) -> [UInt8] {
            var copy = jwt
            copy[i] = copy[i] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            return copy
        }
        #expect(errorCode { _ = try FIDOMetadata.blob(jwt: flipped(dots[1] + 10), at: good) } == "metadata_untrusted")  // signature
        #expect(
            ["metadata_untrusted", "metadata_invalid"].contains(errorCode { _ = try FIDOMetadata.blob(jwt: flipped(dots[0] + 100), at: good) } ?? "accepted"))
        let none = Array(
            (Base64URL.encode(Array(#"{"alg":"none","typ":"JWT"}"#.utf8)) + "." + Base64URL.encode(Array(#"{"no":1,"entries":[]}"#.utf8)) + ".").utf8)
        #expect(errorCode { _ = try FIDOMetadata.blob(jwt: none, at: good) } == "metadata_invalid")
        #expect(errorCode { _ = try FIDOMetadata.blob(jwt: Array("not.a.jwt".utf8), at: good) } == "metadata_invalid")
        let conformance = Self.bytes("mds/conformance/fido-conformance-mds3-blob-no42.jwt")
        let cAt = Vectors.date(.string("2022-11-01T00:00:00Z"))!
        #expect(errorCode { _ = try FIDOMetadata.blob(jwt: conformance, at: cAt) } == "metadata_untrusted")
        #expect(
            try FIDOMetadata.blob(jwt: conformance, at: cAt, options: .init(x509Roots: [Self.pem("mds/conformance/fido-conformance-mds3-root.pem")])).entries
                .count == 200)
    }

    @Test("decoded payloads, single statements and folders of statements and payloads load")
    func metadataSources() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("mds-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let root = Data(W3CVectorTests.attestationCA.der).base64EncodedString()
        let statement =
            #"{"aaguid":"876ca4f5-2071-c3e9-b255-09ef2cdf7ed6","description":"W3C packed ES256","attestationTypes":["basic_full"],"attestationRootCertificates":["\#(root)"]}"#
        try Data(statement.utf8).write(to: dir.appendingPathComponent("a.json"))
        let folder = try FIDOMetadata.load(path: dir.path, at: Self.time2030)
        #expect(folder.entries.count == 1 && folder.entries[0].aaguid?.description == "876ca4f5-2071-c3e9-b255-09ef2cdf7ed6")
        let payload =
            #"{"no":3,"nextUpdate":"2031-01-01","entries":[{"aaguid":"876ca4f5-2071-c3e9-b255-09ef2cdf7ed6","metadataStatement":\#(statement),"statusReports":[{"status":"FIDO_CERTIFIED","effectiveDate":"2024-01-01"},{"status":"REVOKED","effectiveDate":"2025-01-01"}]}]}"#
        let payloadPath = dir.appendingPathComponent("payload.json").path
        try Data(payload.utf8).write(to: URL(fileURLWithPath: payloadPath))
        let loaded = try FIDOMetadata.load(path: payloadPath, at: Self.time2030)
        #expect(loaded.serial == 3 && loaded.entries[0].status?.rawValue == "REVOKED")
        // A folder holding a statement and a decoded payload: both contribute, the payload with its status.
        let both = try FIDOMetadata.load(path: dir.path, at: Self.time2030)
        #expect(both.entries.count == 2)
        #expect(both.entries.filter { $0.status?.rawValue == "REVOKED" }.count == 1)
        // A broken payload in a folder fails the load (its status reports must not vanish silently).
        try Data(#"{"no":4,"entries":5}"#.utf8).write(to: dir.appendingPathComponent("broken.json"))
        #expect(errorCode { _ = try FIDOMetadata.load(path: dir.path, at: Self.time2030) } == "metadata_invalid")
        #expect(errorCode { _ = try FIDOMetadata.load(path: dir.appendingPathComponent("missing.json").path, at: Self.time2030) } == "metadata_invalid")
        // A malformed no or nextUpdate is refused, not read as absent (red team, sixteenth pass:
        // that turned the rollback and staleness checks off).
        for header in [
            #""no":1.5"#, #""no":"7""#, #""no":1e30"#, #""no":-1"#, #""no":1,"nextUpdate":"2099-02-30""#, #""no":1,"nextUpdate":5"#,
            #""no":1,"nextUpdate":"2099-01-01T00:00:00Z""#,
        ] {
            #expect(
                errorCode { _ = try FIDOMetadata.payload(try JSONValue.parse(Array("{\(header),\"entries\":[]}".utf8))) } == "metadata_invalid", "\(header)")
        }
        #expect(try FIDOMetadata.payload(try JSONValue.parse(Array(#"{"no":7,"nextUpdate":"2099-01-01","entries":[]}"#.utf8))).serial == 7)
        // An entry whose statement cannot be read (a root that is no certificate) is skipped, but
        // a compromise it reports is kept (red team, sixteenth pass: it vanished with the entry).
        let badRoot =
            #"{"no":8,"nextUpdate":"2099-01-01","entries":[{"aaguid":"876ca4f5-2071-c3e9-b255-09ef2cdf7ed6","metadataStatement":{"aaguid":"876ca4f5-2071-c3e9-b255-09ef2cdf7ed6","description":"bad root","attestationRootCertificates":["AAAA"]},"statusReports":[{"status":"REVOKED","effectiveDate":"2025-01-01"}]}]}"#
        let kept = try FIDOMetadata.payload(try JSONValue.parse(Array(badRoot.utf8)))
        #expect(kept.skipped == 1 && kept.entries.count == 1 && kept.entries[0].status?.rawValue == "REVOKED" && kept.entries[0].rootCertificates.isEmpty)
        // So is one of an entry without a statement, or with null (MDS3 allows entries without one).
        for statement in ["", #","metadataStatement":null"#, #","metadataStatement":7"#] {
            let bare =
                #"{"no":9,"nextUpdate":"2099-01-01","entries":[{"aaguid":"876ca4f5-2071-c3e9-b255-09ef2cdf7ed6""# + statement
                + #","statusReports":[{"status":"REVOKED","effectiveDate":"2025-01-01"}]},{"attestationCertificateKeyIdentifiers":["aabb"],"statusReports":[{"status":"REVOKED"}]}]}"#
            let read = try FIDOMetadata.payload(try JSONValue.parse(Array(bare.utf8)))
            #expect(read.skipped == 2 && read.entries.count == 2 && read.entries.allSatisfy { $0.status?.rawValue == "REVOKED" }, "\(statement)")
        }
        let certified = badRoot.replacingOccurrences(of: "REVOKED", with: "FIDO_CERTIFIED")
        #expect(try FIDOMetadata.payload(try JSONValue.parse(Array(certified.utf8))).entries.isEmpty)
        // blob(path:) takes only a signed BLOB: a decoded payload, garbage or a missing file is refused.
        try Data(#"{"no":4,"entries":[]}"#.utf8).write(to: dir.appendingPathComponent("payload.json"))
        try Data("eyJ.not.a.jws".utf8).write(to: dir.appendingPathComponent("garbage.jwt"))
        for name in ["payload.json", "garbage.jwt", "missing.jwt"] {
            #expect(errorCode { _ = try FIDOMetadata.blob(path: dir.appendingPathComponent(name).path, at: Self.time2030) } == "metadata_invalid", "\(name)")
        }
    }

    @Test("metadata roots make an authenticator trusted; a compromised status is refused when trust is required")
    func metadataTrust() throws {
        let f = W3CFixture("w3c-packed-es256.json")
        let aaguid = AAGUID(bytes: f.aaguid)!
        func anchors(_ status: String?) -> TrustAnchors {
            TrustAnchors(metadata: [
                MetadataEntry(
                    aaguid: aaguid, description: "W3C packed ES256", attestationTypes: ["basic_full"],
                    attestationRootCertificates: [W3CVectorTests.attestationCA], status: status.map(AuthenticatorStatus.init))
            ])
        }
        let trusted = try f.verify(anchors: anchors("FIDO_CERTIFIED_L1"))
        #expect(trusted.trust.trusted && trusted.trust.metadata?.description == "W3C packed ES256")
        let revoked = try f.verify(anchors: anchors("REVOKED"))
        #expect(!revoked.trust.trusted && revoked.trust.metadata?.status?.isCompromised == true)
        #expect(f.code({ $0.attestation.requireTrustedAttestation = true }, anchors: anchors("USER_VERIFICATION_BYPASS")) == "authenticator_compromised")
        // Metadata that lists only attca makes a packed x5c attestation attca.
        let attca = TrustAnchors(metadata: [
            MetadataEntry(aaguid: aaguid, description: "x", attestationTypes: ["attca"], attestationRootCertificates: [W3CVectorTests.attestationCA])
        ])
        #expect(try f.verify(anchors: attca).attestationType == .attca)
        // Metadata that lists only self (surrogate) attestation: a full chain is not that authenticator.
        let surrogate = TrustAnchors(metadata: [
            MetadataEntry(aaguid: aaguid, description: "x", attestationTypes: ["basic_surrogate"], attestationRootCertificates: [W3CVectorTests.attestationCA])
        ])
        let lax = try f.verify(anchors: surrogate)
        #expect(!lax.trust.trusted && lax.trust.reason.contains("basic_surrogate"))
        #expect(f.code({ $0.attestation.requireTrustedAttestation = true }, anchors: surrogate) == "attestation_type_not_allowed")
    }

    @Test("a test authority's metadata statements make its attestations trusted (by AAGUID and, for U2F, by key identifier), and only those")
    func testAuthorityStatements() throws {
        let (authority, profile, aaguid) = try Self.authorityKey(0x5a)
        let statements = [
            authority.metadataStatement(aaguid: aaguid, description: "test key"),
            authority.metadataStatement(aaguid: nil, description: "test U2F key"),
        ]
        let entries = try statements.map { try FIDOMetadata.statementEntry($0, status: nil) }
        #expect(entries[0].aaguid == aaguid && entries[1].attestationCertificateKeyIdentifiers == [authority.attestationKeyIdentifier])
        func result(_ attestation: SoftwareAuthenticator.Attestation, anchors: TrustAnchors) throws -> RegistrationResult {
            try Self.register(attestation, profile: profile, anchors: anchors)
        }
        var anchors = TrustAnchors.builtIn
        anchors.add(entries)
        for attestation in [SoftwareAuthenticator.Attestation.packedFull(authority), .fidoU2F(authority)] {
            #expect(try result(attestation, anchors: anchors).trust.trusted)
            #expect(try !result(attestation, anchors: .builtIn).trust.trusted)
        }
        // Metadata that says self attestation only makes full attestation untrusted, but an
        // expired certificate still fails first: a metadata objection never excuses it.
        var surrogate = TrustAnchors.builtIn
        surrogate.add([
            try FIDOMetadata.statementEntry(
                authority.metadataStatement(aaguid: aaguid, description: "self only", attestationTypes: ["basic_surrogate"]), status: nil)
        ])
        let objected = try result(.packedFull(authority), anchors: surrogate).trust
        #expect(!objected.trusted && objected.reason.contains("basic_surrogate"))
        let expired = try authority.packedAttestation(aaguid: profile.aaguid) { $0.notAfter = Date(timeIntervalSince1970: 1_735_689_600) }
        #expect(errorCode { _ = try result(expired, anchors: surrogate) } == "certificate_expired")
    }

    /// A test authority, and a security-key profile of AAGUID `byte` repeated.
    static func authorityKey(_ byte: UInt8) throws -> (AttestationAuthority, SoftwareAuthenticator.Profile, AAGUID) {
        var profile = SoftwareAuthenticator.Profile.securityKey
        profile.aaguid = [UInt8](repeating: byte, count: 16)
        return (try AttestationAuthority.generate(), profile, AAGUID(bytes: profile.aaguid)!)
    }

    /// A registration by a software authenticator of `profile` with `attestation`, verified
    /// under `anchors` on 2030-01-01.
    static func register(
        _ attestation: SoftwareAuthenticator.Attestation, profile: SoftwareAuthenticator.Profile, anchors: TrustAnchors, requireTrusted: Bool = false
    ) throws -> RegistrationResult {
        let rp = try RelyingParty(
            id: "example.com", origins: ["https://example.com"],
            policy: VerificationPolicy(attestation: AttestationPolicy(requireTrustedAttestation: requireTrusted)),
            clock: .fixed(Date(timeIntervalSince1970: 1_893_456_000)), trustAnchors: anchors)
        let challenge = SecureRandom.bytes(32)
        let parts = try SoftwareAuthenticator(profile: profile).register(
            rpId: rp.id, origin: "https://example.com", challenge: challenge, userHandle: [1], attestation: attestation)
        let ceremony = PendingCeremony(
            kind: .registration, challenge: challenge, user: try UserEntity(id: [1], name: "a"), algorithms: [],
            userVerification: .preferred, expiresAt: .distantFuture)
        return try RegistrationVerifier.verify(parts.response, ceremony: ceremony, relyingParty: rp)
    }

    @Test("a leaked attestation key reported compromised is not trusted under a sibling model's AAGUID whose entry lists the same root")
    func compromisedKeyUnderSiblingModel() throws {
        // Red team, round 28 (F1): only the claimed entry's status was read, so a key FIDO reports
        // compromised (by U2F key identifier, or in a report naming its certificate) was trusted,
        // even under requireTrustedAttestation, when the registration claimed another model of the
        // same vendor. §8.2.1 makes the certificate's AAGUID extension optional.
        let (authority, profile, sibling) = try Self.authorityKey(0x5b)
        let leaked = try authority.packedAttestation(aaguid: profile.aaguid) { $0.extensions.removeAll { $0.oid == X509Certificate.OID.fidoGenCeAAGUID } }
        guard case .packed(let x5c, _) = leaked else { Issue.record("not packed"); return }
        let statement = authority.metadataStatement(aaguid: sibling, description: "sibling model")
        let u2f = authority.metadataStatement(aaguid: nil, description: "U2F model")
        let other = authority.metadataStatement(aaguid: AAGUID(bytes: [UInt8](repeating: 0x5c, count: 16))!, description: "leaked model")
        let compromise: JSONValue = ["status": "ATTESTATION_KEY_COMPROMISE", "effectiveDate": "2025-01-01"]
        var named = compromise.objectValue!
        named["certificate"] = .string(Data(x5c[0]).base64EncodedString())
        func anchors(_ entries: [JSONValue]) throws -> TrustAnchors {
            var anchors = TrustAnchors.builtIn
            anchors.add(try FIDOMetadata.payload(["no": 1, "nextUpdate": "2099-01-01", "entries": .array(entries)]).entries)
            return anchors
        }
        func result(_ anchors: TrustAnchors, requireTrusted: Bool = false) throws -> RegistrationResult {
            try Self.register(leaked, profile: profile, anchors: anchors, requireTrusted: requireTrusted)
        }
        let siblingEntry: JSONValue = ["aaguid": .string(sibling.description), "metadataStatement": statement]
        // Without a compromise: trusted, the AAGUID verified through the sibling's entry.
        #expect(try result(try anchors([siblingEntry]), requireTrusted: true).trust.trusted)
        let cases: [(String, JSONValue)] = [
            (
                "by key identifier",
                [
                    "attestationCertificateKeyIdentifiers": .array([.string(authority.attestationKeyIdentifier)]), "metadataStatement": u2f,
                    "statusReports": [compromise],
                ]
            ),
            (
                "by the report's certificate",
                [
                    "aaguid": .string(AAGUID(bytes: [UInt8](repeating: 0x5c, count: 16))!.description), "metadataStatement": other,
                    "statusReports": [.object(named)],
                ]
            ),
        ]
        // Re-check of round 28: the root the chain leads to (here a CA that metadata lists as the
        // root, which a vendor's batch CA often is) was never looked up, since the client sends only
        // the leaf its leaked key mints; fido-u2f never sends more.
        var namingRoot = compromise.objectValue!
        namingRoot["certificate"] = .string(Data(authority.root.der).base64EncodedString())
        let rootKeyIdentifier = try #require(authority.root.publicKeyIdentifier)
        var u2fRoot = u2f.objectValue!
        u2fRoot["attestationCertificateKeyIdentifiers"] = [.string(rootKeyIdentifier)]
        let rootCases: [(String, JSONValue)] = [
            (
                "the root, by key identifier",
                [
                    "attestationCertificateKeyIdentifiers": .array([.string(rootKeyIdentifier)]),
                    "metadataStatement": .object(u2fRoot), "statusReports": [compromise],
                ]
            ),
            (
                "the root, by the report's certificate",
                [
                    "aaguid": .string(AAGUID(bytes: [UInt8](repeating: 0x5c, count: 16))!.description), "metadataStatement": other,
                    "statusReports": [.object(namingRoot)],
                ]
            ),
        ]
        #expect(x5c.count == 1, "the client sends the leaf alone")
        for (name, compromised) in cases + rootCases {
            let both = try anchors([siblingEntry, compromised])
            #expect(errorCode { _ = try result(both, requireTrusted: true) } == "authenticator_compromised", "\(name)")
            let registered = try result(both)
            #expect(!registered.trust.trusted && registered.trust.reason.contains("ATTESTATION_KEY_COMPROMISE"), "\(name): \(registered.trust.reason)")
            // The audit of a credential registered before the report flags it too.
            let at = Date(timeIntervalSince1970: 1_893_456_000)
            #expect(CredentialAudit.flag(for: registered.credential, anchors: try anchors([siblingEntry]), at: at) == nil)
            #expect(CredentialAudit.flag(for: registered.credential, anchors: both, at: at)?.status.rawValue == "ATTESTATION_KEY_COMPROMISE", "\(name)")
        }
        // A report naming a certificate applies from its date only.
        var later = named
        later["effectiveDate"] = "2031-01-01"
        let future: JSONValue = [
            "aaguid": .string(AAGUID(bytes: [UInt8](repeating: 0x5c, count: 16))!.description), "metadataStatement": other, "statusReports": [.object(later)],
        ]
        #expect(try result(try anchors([siblingEntry, future]), requireTrusted: true).trust.trusted)
        // Only a key compromise follows the key: another model's own status naming the shared root
        // (re-check of round 28: a USER_VERIFICATION_BYPASS so written refused every sibling).
        for status in ["USER_VERIFICATION_BYPASS", "REVOKED", "USER_KEY_REMOTE_COMPROMISE"] {
            var own = namingRoot
            own["status"] = .string(status)
            let model: JSONValue = [
                "aaguid": .string(AAGUID(bytes: [UInt8](repeating: 0x5c, count: 16))!.description), "metadataStatement": other, "statusReports": [.object(own)],
            ]
            #expect(try result(try anchors([siblingEntry, model]), requireTrusted: true).trust.trusted, "\(status)")
        }
    }

    @Test("real devices are trusted through the real FIDO BLOB: YubiKey (packed, by AAGUID; U2F, by key identifier), Surface Pro 4 (TPM)")
    func realDevicesThroughMDS() throws {
        let at = Vectors.date(.string("2024-08-31T12:00:00Z"))!
        var anchors = TrustAnchors.builtIn
        anchors.add(try FIDOMetadata.blob(jwt: Self.bytes("mds/production/fido-mds3-blob-no85.jwt"), at: at).entries)
        for (file, expected) in [
            ("py_webauthn-reg-packed-verify_attestation_from_yubikey_firefox", "Security Key by Yubico with NFC"),
            ("py_webauthn-reg-fido-u2f-verify_attestation_from_yubikey_firefox", "Security Key by Yubico with NFC"),
            ("py_webauthn-reg-tpm-verify_attestation_surface_pro_4", "Windows Hello Hardware Authenticator"),
        ] {
            let v = Vectors.load("realworld/\(file).json")
            let e = v["expected"]!
            let rp = try RelyingParty(
                id: e["rpId"]!.stringValue!, origins: Vectors.strings(e["origin"]),
                policy: VerificationPolicy(algorithms: COSEAlgorithm.supported, attestation: AttestationPolicy(requireTrustedAttestation: true)),
                clock: .fixed(at), trustAnchors: anchors)
            let ceremony = PendingCeremony(
                kind: .registration, challenge: Vectors.b64(e["challenge_b64url"]), user: try UserEntity(id: [1], name: "u"),
                algorithms: COSEAlgorithm.supported, userVerification: .preferred, expiresAt: .distantFuture)
            let result = try RegistrationVerifier.verify(RegistrationResponse(json: v["response"]!), ceremony: ceremony, relyingParty: rp)
            #expect(result.trust.trusted, "\(file): \(result.trust.reason)")
            #expect(result.trust.metadata?.description == expected)
        }
    }

    // MARK: android-safetynet (§8.5)

    static let safetyNet = "realworld/simplewebauthn-reg-android-safetynet-should-skip-cts-check-when-enforcement-option-is-false.json"

    func safetyNetCode(
        at: String = "2025-06-09T20:40:42.989Z", clientDataExtra: Bool = false, response: ((inout [UInt8]) -> Void)? = nil,
        policy: (inout AttestationPolicy) -> Void = { $0.requireSafetyNetCTSProfileMatch = false }
    ) -> String? {
        let v = Vectors.load(Self.safetyNet)
        let e = v["expected"]!
        var attestation = AttestationPolicy()
        policy(&attestation)
        return errorCode {
            var r = try RegistrationResponse(json: v["response"]!)
            var object = try CBORDecoder.decode(r.attestationObject)
            if let response {
                var statement = object["attStmt"]!
                var jws = statement["response"]!.bytesValue!
                response(&jws)
                statement = .map([CBORPair(.text("ver"), statement["ver"]!), CBORPair(.text("response"), .bytes(jws))])
                object = .map([CBORPair(.text("fmt"), object["fmt"]!), CBORPair(.text("attStmt"), statement), CBORPair(.text("authData"), object["authData"]!)])
            }
            var clientData = r.clientDataJSON
            if clientDataExtra { clientData = Array(clientData.dropLast()) + Array(#","x":1}"#.utf8) }
            r = RegistrationResponse(id: r.id, clientDataJSON: clientData, attestationObject: CBOREncoder.encode(object))
            let rp = try RelyingParty(
                id: e["rpId"]!.stringValue!, origins: Vectors.strings(e["origin"]),
                policy: VerificationPolicy(attestation: attestation), clock: .fixed(Vectors.date(.string(at))!))
            let ceremony = PendingCeremony(
                kind: .registration, challenge: Vectors.b64(e["challenge_b64url"]), user: try UserEntity(id: [1], name: "u"),
                userVerification: .preferred, expiresAt: .distantFuture)
            _ = try RegistrationVerifier.verify(r, ceremony: ceremony, relyingParty: rp)
        }
    }

    @Test("android-safetynet: verifies; CTS, freshness, nonce, signature and alg are enforced")
    func safetyNet() {
        #expect(safetyNetCode() == nil)
        #expect(safetyNetCode(policy: { _ in }) == "attestation_integrity_failed")
        #expect(safetyNetCode(at: "2025-06-09T20:45:00Z") == "attestation_timestamp_invalid")
        #expect(safetyNetCode(at: "2025-06-09T20:35:00Z") == "attestation_timestamp_invalid")
        #expect(safetyNetCode(clientDataExtra: true) == "attestation_nonce_mismatch")
        #expect(
            safetyNetCode(response: { jws in jws[jws.count - 5] = jws[jws.count - 5] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A") })
                == "attestation_signature_invalid")
        #expect(
            safetyNetCode(response: { jws in
                let header = Base64URL.encode(Array(#"{"alg":"none"}"#.utf8))
                let dot = jws.firstIndex(of: UInt8(ascii: "."))!
                jws = Array(header.utf8) + jws[dot...]
            }) == "attestation_statement_malformed")
        #expect(safetyNetCode(response: { jws in jws = Array(jws.prefix(40)) }) != nil)
    }

    @Test("android-safetynet: the signing certificate must be issued to attest.android.com")
    func safetyNetHost() throws {
        let v = Vectors.load(Self.safetyNet)
        let response = try RegistrationResponse(json: v["response"]!)
        let object = try AttestationObject(bytes: response.attestationObject)
        // A JWS signed by a certificate for another host (issued here), over the right payload.
        let jws = JWSForTest(object.statement["response"]!.bytesValue!)
        let key = try SigningKey.generate(.rs256)
        let cert = try CertificateBuilder(subject: [("CN", "attest.example.com")]).build(key: key, issuer: nil, issuerKey: key)
        let forged = try jws.resigned(key: key, certificate: cert)
        let input = AttestationInput(
            statement: .map([CBORPair(.text("ver"), .text("1")), CBORPair(.text("response"), .bytes(forged))]),
            authenticatorData: object.authenticatorData, clientDataHash: Digest.sha256(response.clientDataJSON),
            policy: VerificationPolicy(attestation: AttestationPolicy(requireSafetyNetCTSProfileMatch: false)),
            now: Vectors.date(.string("2025-06-09T20:40:42.989Z"))!)
        #expect(errorCode { _ = try AndroidSafetyNetAttestation.verify(input) } == "attestation_certificate_invalid")
        let right = try CertificateBuilder(subject: [("CN", "attest.android.com")]).build(key: key, issuer: nil, issuerKey: key)
        let genuine = try jws.resigned(key: key, certificate: right)
        let input2 = AttestationInput(
            statement: .map([CBORPair(.text("ver"), .text("1")), CBORPair(.text("response"), .bytes(genuine))]),
            authenticatorData: object.authenticatorData, clientDataHash: Digest.sha256(response.clientDataJSON),
            policy: input.policy, now: input.now)
        #expect(errorCode { _ = try AndroidSafetyNetAttestation.verify(input2) } == nil)  // verifies; untrusted (no Google chain)
    }
}

/// Re-signs a SafetyNet JWS's payload with another key and certificate.
struct JWSForTest {
    let payload: String
    init(_ compact: [UInt8]) {
        let parts = compact.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        payload = String(decoding: parts[1], as: UTF8.self)
    }
    func resigned(key: SigningKey, certificate: X509Certificate) throws -> [UInt8] {
        let header = #"{"alg":"RS256","x5c":["\#(Data(certificate.der).base64EncodedString())"]}"#
        let input = Base64URL.encode(Array(header.utf8)) + "." + payload
        return Array((input + "." + Base64URL.encode(try key.sign(Array(input.utf8)))).utf8)
    }
}
