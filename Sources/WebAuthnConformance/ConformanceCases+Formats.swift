internal import Foundation
internal import WebAuthnCore
internal import WebAuthnTesting
internal import WebAuthnMetadata
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

extension CaseList {
    /// Server-ServerAuthenticatorAttestationResponse-Resp-4 to -B (algorithms and attestation
    /// formats), MDS3-Status and the L3 §7.1 and §8 rules the list lacks.
    func formatCases() {
        let r = self.r, authority = self.authority, att = Self.att
        let expired = Date(timeIntervalSince1970: 1_735_689_600)  // 2025-01-01
        let later = Date(timeIntervalSince1970: 4_070_908_800)  // 2099-01-01

        for (n, alg) in [(2, COSEAlgorithm.ps256), (5, .rs256), (9, .es256), (10, .es384), (11, .es512), (12, .edDSA)] {
            registration("\(att)-Resp-4 P-\(n)", "packed self attestation with \(alg.name) verifies", passes: true, algorithm: alg, attestation: .packedSelf)
        }
        // OPTIONAL in the list: run when the server offers the algorithm.
        for (n, alg) in [(3, COSEAlgorithm.ps384), (4, .ps512), (6, .rs384), (7, .rs512)] where offered.contains(alg.rawValue) {
            registration(
                "\(att)-Resp-4 P-\(n)", "packed self attestation with \(alg.name) (optional; the server offers it) verifies", passes: true,
                algorithm: alg, attestation: .packedSelf)
        }

        // Packed full attestation (§8.2), each defect alone on a chain to the runner's (trusted) root.
        registration("\(att)-Resp-5 P-1", "packed full attestation chaining to the metadata root verifies", passes: true, attestation: r.packedFull)
        registration(
            "\(att)-Resp-5 P-2", "packed full attestation through an intermediate CA to the metadata root verifies", passes: true,
            attestation: try! Self.packedUnder(authority, intermediateNotAfter: later) { _ in })
        registration("\(att)-Resp-5 F-1", "an unknown fmt fails", passes: false, attestation: r.packedFull, edit: { $0.format = "not-a-format" })
        registration(
            "\(att)-Resp-5 F-2", "packed full attestation whose signature does not verify fails", passes: false, attestation: r.packedFull,
            edit: { $0.authenticatorData.signCount = 99 })
        registration(
            "\(att)-Resp-5 F-3", "packed full attestation without x5c (so self attestation with the wrong key) fails", passes: false, attestation: r.packedFull,
            edit: { $0.statement = $0.statement.removing("x5c") })
        registration(
            "\(att)-Resp-5 F-4", "an x5c that is not an array fails", passes: false, attestation: r.packedFull,
            edit: { $0.statement = $0.statement.replacing("x5c", with: .bytes([1])) })
        registration(
            "\(att)-Resp-5 F-5", "an empty x5c fails", passes: false, attestation: r.packedFull,
            edit: { $0.statement = $0.statement.replacing("x5c", with: .array([])) })
        registration(
            "\(att)-Resp-5 F-6", "an expired attestation certificate fails", passes: false,
            attestation: try! Self.packedUnder(authority) { $0.notAfter = expired })
        registration(
            "\(att)-Resp-5 F-7", "an attestation certificate that is not yet valid fails", passes: false,
            attestation: try! Self.packedUnder(authority) { $0.notBefore = later })
        registration(
            "\(att)-Resp-5 F-9", "an x5c chain that does not lead to a trusted root fails (trusted attestation required)", passes: false,
            attestation: try! Self.untrustedPacked())
        registration(
            "\(att)-Resp-5 F-11", "an x5c not in order (the root before the attestation certificate) fails", passes: false,
            attestation: try! Self.packedUnder(authority, rootFirst: true) { _ in })
        registration(
            "\(att)-Resp-5 F-12", "an x5c with an expired intermediate certificate fails", passes: false,
            attestation: try! Self.packedUnder(authority, intermediateNotAfter: expired) { _ in })
        registration(
            "\(att)-Resp-5 F-13", "a sig made with a key other than the attestation certificate's fails", passes: false,
            attestation: try! Self.packedUnder(authority, signer: SigningKey.generate(.es256)) { _ in })
        registration(
            "\(att)-Resp-5 F-14", "a sig made with the new credential key instead of the attestation (batch) key fails", passes: false,
            attestation: r.packedFull, defect: .signedByCredentialKey)
        registration(
            "L3-8.2 P-1", "an x5c that also carries the trusted root itself verifies (the list's Resp-5 F-10 expects a failure; L3 allows it)", passes: true,
            attestation: try! Self.packedUnder(authority, intermediateNotAfter: later, includeRoot: true) { _ in })

        // The attestation certificate requirements of §8.2.1, each broken alone.
        let aaguidOID = X509Certificate.OID.fidoGenCeAAGUID, basicOID = X509Certificate.OID.basicConstraints
        registration(
            "L3-8.2.1 P-1", "packed full attestation with a certificate the runner builds the same way as the failing cases below verifies",
            passes: true, attestation: try! Self.packedUnder(authority) { _ in })
        registration(
            "L3-8.2.1 F-1", "an attestation certificate of version 1 fails", passes: false,
            attestation: try! Self.packedUnder(authority) {
                $0.version = 1; $0.extensions = []
            })
        registration(
            "L3-8.2.1 F-2", "an attestation certificate whose subject OU is not \"Authenticator Attestation\" fails", passes: false,
            attestation: try! Self.packedUnder(authority) { $0.subject = $0.subject.map { $0.0 == "OU" ? ("OU", "Marketing") : $0 } })
        registration(
            "L3-8.2.1 F-3", "an attestation certificate without subject CN fails", passes: false,
            attestation: try! Self.packedUnder(authority) { $0.subject = $0.subject.filter { $0.0 != "CN" } })
        registration(
            "L3-8.2.1 F-4", "an attestation certificate with basic constraints CA true fails", passes: false,
            attestation: try! Self.packedUnder(authority) {
                $0.extensions = $0.extensions.map { $0.oid == basicOID ? (basicOID, true, DERWriter.basicConstraintsCATrue) : $0 }
            })
        registration(
            "L3-8.2.1 F-5", "an attestation certificate whose AAGUID extension differs from authenticator data fails", passes: false,
            attestation: try! Self.packedUnder(authority) {
                $0.extensions = $0.extensions.map { $0.oid == aaguidOID ? (aaguidOID, false, DERWriter.aaguid([UInt8](repeating: 0x42, count: 16))) : $0 }
            })
        registration(
            "L3-8.2.1 F-6", "an attestation certificate whose AAGUID extension is critical fails", passes: false,
            attestation: try! Self.packedUnder(authority) { $0.extensions = $0.extensions.map { $0.oid == aaguidOID ? (aaguidOID, true, $0.der) : $0 } })

        // FIDO metadata status reports (MDS3 §3.1.4): the runner's status authenticators, each
        // with its own AAGUID and a packed full attestation under the trusted root.
        for (i, item) in ConformancePKI.statusAuthenticators.enumerated() {
            let compromised = AuthenticatorStatus(rawValue: item.status).isCompromised
            registration(
                compromised ? "MDS3-Status F-\(i + 1)" : "MDS3-Status P-\(i - 4)",
                "packed full attestation from an authenticator whose metadata status is \(item.status) \(compromised ? "fails" : "verifies")",
                passes: !compromised, attestation: try! Self.packedUnder(authority, aaguid: item.aaguid) { _ in }, aaguid: item.aaguid)
        }

        // The "Metadata Service" group: BLOBs the server loaded (or rejected) at start-up, from DIR/mds.
        for item in ConformanceMDS.cases {
            registration(
                "Server-MDS-1 \(item.number)", item.intent, passes: item.passes,
                attestation: try! Self.packedUnder(authority, aaguid: item.aaguid) { _ in }, aaguid: item.aaguid)
        }

        // Packed self attestation from the runner's authenticator whose metadata lists basic_surrogate only.
        registration("\(att)-Resp-6 P-1", "packed self attestation verifies", passes: true, attestation: .packedSelf)
        registration(
            "\(att)-Resp-6 F-1", "packed self attestation whose signature does not verify fails", passes: false, attestation: .packedSelf,
            edit: { $0.authenticatorData.signCount = 77 })
        registration(
            "\(att)-Resp-6 F-2", "full attestation from an authenticator whose metadata lists self attestation only fails", passes: false,
            attestation: try! Self.packedUnder(authority, aaguid: ConformancePKI.selfAAGUID) { _ in }, aaguid: ConformancePKI.selfAAGUID)
        registration("\(att)-Resp-6 F-3", "an unknown fmt fails", passes: false, attestation: .packedSelf, edit: { $0.format = "not-a-format" })

        registration("\(att)-Resp-7 P-1", "none attestation verifies", passes: true, options: ["attestation": "none"])
        registration(
            "\(att)-Resp-7 P-2", "packed self attestation verifies although the options asked for none", passes: true,
            attestation: .packedSelf, options: ["attestation": "none"])
        registration(
            "\(att)-Resp-7 F-1", "fmt none with a non-empty attStmt (a full packed statement) fails", passes: false, attestation: r.packedFull,
            edit: { $0.format = "none" })

        registration(
            "\(att)-Resp-8 P-1", "fido-u2f attestation chaining to the metadata root (matched by key identifier) verifies", passes: true,
            attestation: .fidoU2F(authority))
        registration(
            "\(att)-Resp-8 F-1", "fido-u2f with a non-zero AAGUID fails", passes: false, attestation: .fidoU2F(authority),
            edit: { $0.authenticatorData.attested?.aaguid = SecureRandom.bytes(16) })
        registration(
            "\(att)-Resp-8 F-2", "fido-u2f whose signature does not verify (signed over another credential id) fails", passes: false,
            attestation: .fidoU2F(authority),
            edit: {
                let other = SecureRandom.bytes(32); $0.id = other; $0.authenticatorData.attested?.credentialId = other
            })

        tpmCases()

        registration("\(att)-Resp-A P-1", "android-key attestation verifies", passes: true, attestation: .androidKey(authority))
        registration(
            "\(att)-Resp-A F-1", "android-key whose certificate binds another clientDataHash fails", passes: false, attestation: .androidKey(authority),
            defect: .wrongChallenge)
        registration(
            "\(att)-Resp-A F-2", "android-key whose certificate holds a key other than the credential key fails", passes: false,
            attestation: .androidKey(authority), defect: .foreignCertificateKey)
        registration(
            "\(att)-Resp-A F-3", "android-key whose x5c is not in order (the root first) fails", passes: false, attestation: .androidKey(authority),
            edit: { $0.statement = $0.statement.replacing("x5c", with: .array(($0.statement["x5c"]?.arrayValue ?? []).reversed())) })
        registration("L3-8.4 F-1", "android-key with allApplications fails", passes: false, attestation: .androidKey(authority), defect: .allApplications)
        registration(
            "L3-8.4 F-2", "android-key whose signature does not verify with the leaf certificate's key fails", passes: false,
            attestation: .androidKey(authority), edit: { $0.authenticatorData.signCount = 5 })

        let safetyNet = SoftwareAuthenticator.Attestation.androidSafetyNet(authority)
        registration(
            "\(att)-Resp-B P-1", "android-safetynet attestation (JWS by attest.android.com under the metadata root, fresh, ctsProfileMatch) verifies",
            passes: true, attestation: safetyNet)
        for (n, defect, intent) in [
            (1, SoftwareAuthenticator.StatementDefect.emptyVersion, "an empty ver"), (2, .emptyResponse, "an empty response"),
            (3, .wrongNonce, "a nonce that is not base64(SHA-256(authData ‖ clientDataHash))"),
            (4, .emptyCertificateChain, "a JWS header whose x5c is empty"), (5, .ctsProfileMismatch, "ctsProfileMatch false"),
            (6, .futureTimestamp, "a timestampMs two minutes in the future"), (7, .staleTimestamp, "a timestampMs two minutes old"),
        ] {
            registration("\(att)-Resp-B F-\(n)", "android-safetynet with \(intent) fails", passes: false, attestation: safetyNet, defect: defect)
        }
        registration(
            "L3-8.5 F-1", "android-safetynet signed by a certificate not issued to attest.android.com fails", passes: false, attestation: safetyNet,
            defect: .wrongHost)

        registration("L3-8.8 P-1", "apple anonymous attestation verifies", passes: true, attestation: .apple(authority))
        registration(
            "L3-8.8 F-1", "apple with a nonce other than SHA-256(authData ‖ clientDataHash) fails", passes: false, attestation: .apple(authority),
            defect: .wrongNonce)
        ceremonyCases()
    }

    /// Resp-9 (tpm) and the §8.3 rules the list lacks. certInfo changes are re-signed
    /// by the AIK so that only the changed rule is broken.
    func tpmCases() {
        let authority = self.authority, att = Self.att
        @Sendable func tpmStatement(_ parts: inout RegistrationParts, _ change: (inout [String: [UInt8]]) -> Void, resign: Bool = false) throws {
            guard case .map(let pairs) = parts.statement else { return }
            var members: [String: [UInt8]] = [:]
            for pair in pairs { if case .text(let k) = pair.key, let b = pair.value.bytesValue { members[k] = b } }
            change(&members)
            if resign, let certInfo = members["certInfo"] {
                members["sig"] = try authority.attestationKey.sign(certInfo)
            }
            parts.statement = .map(
                pairs.map { pair in
                    if case .text(let k) = pair.key, let b = members[k] { return CBORPair(pair.key, .bytes(b)) }
                    return pair
                })
        }
        let tpm = SoftwareAuthenticator.Attestation.tpm(authority)
        registration("\(att)-Resp-9 P-1", "tpm attestation (SHA-256, ECC pubArea, AIK certificate) verifies", passes: true, attestation: tpm)
        registration(
            "\(att)-Resp-9 P-2", "tpm attestation signed RS1 (SHA-1) by an RSA AIK, as Windows Hello TPMs make it, verifies", passes: true,
            attestation: .tpmSHA1(authority))
        registration(
            "\(att)-Resp-9 F-1", "tpm whose x5c is not in order (the root before the AIK certificate) fails", passes: false, attestation: tpm,
            edit: { $0.statement = $0.statement.replacing("x5c", with: .array([.bytes(authority.root.der)] + ($0.statement["x5c"]?.arrayValue ?? []))) })
        registration(
            "\(att)-Resp-9 F-2", "tpm with certInfo.extraData not the hash of attToBeSigned fails", passes: false, attestation: tpm, defect: .wrongExtraData)
        registration(
            "\(att)-Resp-9 F-3", "tpm whose certInfo magic is not TPM_GENERATED_VALUE fails (re-signed by the AIK)", passes: false, attestation: tpm,
            edit: { try tpmStatement(&$0, { $0["certInfo"]?[3] ^= 0x01 }, resign: true) })
        registration(
            "\(att)-Resp-9 F-4", "tpm whose pubArea.unique is not the new credential key fails", passes: false, attestation: tpm,
            edit: { try tpmStatement(&$0, { if let n = $0["pubArea"]?.count { $0["pubArea"]?[n - 1] ^= 0x01 } }) })
        registration("L3-8.3 P-1", "tpm attestation with an RSA pubArea (RS256 credential) verifies", passes: true, algorithm: .rs256, attestation: tpm)
        registration(
            "L3-8.3 F-1", "tpm attestation signed RS1 whose extraData is not the SHA-1 of attToBeSigned fails", passes: false,
            attestation: .tpmSHA1(authority), defect: .wrongExtraData)
        registration(
            "L3-8.3 F-2", "tpm with ver other than \"2.0\" fails", passes: false, attestation: tpm,
            edit: { $0.statement = $0.statement.replacing("ver", with: .text("1.0")) })
        registration(
            "L3-8.3 F-3", "tpm whose certInfo type is not TPM_ST_ATTEST_CERTIFY fails (re-signed by the AIK)", passes: false, attestation: tpm,
            edit: { try tpmStatement(&$0, { $0["certInfo"]?[5] = 0x18 }, resign: true) })  // TPM_ST_ATTEST_QUOTE
        registration(
            "L3-8.3 F-4", "tpm whose AIK signature over certInfo does not verify fails", passes: false, attestation: tpm,
            edit: { try tpmStatement(&$0, { if let n = $0["sig"]?.count { $0["sig"]?[n / 2] ^= 0x01 } }) })
        registration(
            "L3-8.3 F-5",
            "tpm whose certInfo name is computed with SHA-1, not pubArea.nameAlg (SHA-256), fails (re-signed by the AIK; the list's Resp-9 P-3 expects success)",
            passes: false, attestation: tpm,
            edit: {
                try tpmStatement(
                    &$0,
                    { m in
                        guard let info = m["certInfo"], let pubArea = m["pubArea"], info.count > 10 else { return }
                        // magic, type, qualifiedSigner, extraData, clockInfo, firmwareVersion
                        let nameAt = 10 + (Int(info[8]) << 8 | Int(info[9])) + TPM.clockInfoSize + 8
                        let name: [UInt8] = [UInt8(TPM.Alg.sha1 >> 8), UInt8(TPM.Alg.sha1 & 0xff)] + Digest.hash(.sha1, pubArea)
                        let sized = [UInt8(0), UInt8(name.count)] + name
                        m["certInfo"] = Array(info[..<nameAt]) + sized + sized
                    }, resign: true)
            })
        registration("L3-8.3.1 F-1", "tpm with an AIK certificate lacking tcg-kp-AIKCertificate fails", passes: false, attestation: tpm, defect: .aikWithoutEKU)
    }

    /// Packed full attestation under the runner's root with the certificate changed by `change`.
    static func packedUnder(
        _ authority: AttestationAuthority, signer: SigningKey? = nil, rootFirst: Bool = false, intermediateNotAfter: Date? = nil,
        includeRoot: Bool = false, aaguid: AAGUID = ConformancePKI.aaguid,
        _ change: (inout CertificateBuilder) -> Void
    ) throws -> SoftwareAuthenticator.Attestation {
        try authority.packedAttestation(
            aaguid: aaguid.bytes, signer: signer, rootFirst: rootFirst, intermediateNotAfter: intermediateNotAfter,
            includeRoot: includeRoot, certificate: change)
    }

    /// Packed full attestation whose chain leads to a root no metadata names.
    static func untrustedPacked() throws -> SoftwareAuthenticator.Attestation {
        let rootKey = try SigningKey.generate(.es256)
        let root = try CertificateBuilder(subject: [("CN", "Unknown Root")]).build(key: rootKey, issuer: nil, issuerKey: rootKey)
        let key = try SigningKey.generate(.es256)
        var leaf = CertificateBuilder(subject: [("C", "AA"), ("O", "Unknown"), ("OU", "Authenticator Attestation"), ("CN", "Unknown Authenticator")])
        leaf.extensions = [(X509Certificate.OID.basicConstraints, true, [0x30, 0x00])]
        let cert = try leaf.build(key: key, issuer: root, issuerKey: rootKey)
        return .packed(x5c: [cert.der], signer: try AttestationSigner(pem: key.privateKeyPEM()))
    }
}
