internal import Foundation
internal import WebAuthnCore
package import _WebAuthnEncoding
package import _WebAuthnCrypto

/// Attestation statements of the formats that bind a certificate to the
/// credential (WebAuthn L3 §8.3–8.8), made as real authenticators make them.
enum FormatStatements {
    /// `fido-u2f` (§8.6): the attestation key signs 0x00 ‖ rpIdHash ‖ clientDataHash ‖ credentialId ‖ 0x04‖x‖y.
    static func fidoU2F(_ parts: RegistrationParts, authority: AttestationAuthority) throws -> CBOR {
        guard let attested = parts.authenticatorData.attested, let x = attested.publicKey[COSE.Label.x]?.bytesValue,
            let y = attested.publicKey[COSE.Label.y]?.bytesValue
        else {
            throw WebAuthnError(.configurationInvalid, "fido-u2f needs an ES256 credential")
        }
        let sig = try authority.attestationKey.sign(
            [0x00], parts.authenticatorData.rpIdHash, Digest.sha256(parts.clientDataJSON),
            attested.credentialId, [ECCurve.uncompressedPointPrefix] + x + y)
        return .map([CBORPair(.text("sig"), .bytes(sig)), CBORPair(.text("x5c"), .array([.bytes(try authority.u2fCertificate().der)]))])
    }

    /// `apple` (§8.8): a certificate for the credential key with the nonce extension.
    static func apple(_ parts: RegistrationParts, credentialKey: SigningKey, authority: AttestationAuthority, nonce: [UInt8]? = nil) throws -> CBOR {
        let value = nonce ?? Digest.hash(.sha256, parts.authenticatorData.bytes, Digest.sha256(parts.clientDataJSON))
        var b = CertificateBuilder(subject: [("CN", "Apple-style test credential")])
        b.extensions = [(X509Certificate.OID.appleNonce, false, DERWriter.sequence(DERWriter.explicit(1, DERWriter.octets(value))))]
        return .map([CBORPair(.text("x5c"), .array([.bytes(try authority.issue(b, for: credentialKey).der)]))])
    }

    /// `android-safetynet` (§8.5): a compact JWS (RS256) signed by a certificate
    /// issued to `host` (attest.android.com) under `authority`'s root, whose
    /// payload nonce is base64(SHA-256(authData ‖ clientDataHash)).
    static func safetyNet(
        _ parts: RegistrationParts, authority: AttestationAuthority, nonce: [UInt8]? = nil, timestamp: Date = Date(),
        ctsProfileMatch: Bool = true, host: String = "attest.android.com", emptyChain: Bool = false
    ) throws -> CBOR {
        let key = authority.safetyNetKey
        let leaf = try authority.issue(CertificateBuilder(subject: [("C", "AA"), ("O", "WebAuthn Testing"), ("CN", host)]), for: key)
        let value = nonce ?? Digest.hash(.sha256, parts.authenticatorData.bytes, Digest.sha256(parts.clientDataJSON))
        let payload: JSONValue = [
            "nonce": .string(Data(value).base64EncodedString()),
            "timestampMs": .number((timestamp.timeIntervalSince1970 * 1000).rounded()),
            "apkPackageName": "com.google.android.gms",
            "ctsProfileMatch": .bool(ctsProfileMatch),
            "basicIntegrity": true,
        ]
        let jws = try JWSWriter.compact(payload, key: key, x5c: emptyChain ? [] : [leaf, authority.root])
        return .map([CBORPair(.text("ver"), .text("14366018")), CBORPair(.text("response"), .bytes(jws))])
    }

    /// `android-key` (§8.4): a certificate for the credential key with a
    /// KeyDescription (challenge = clientDataHash, TEE-enforced origin GENERATED
    /// and purpose SIGN), and the credential key's signature.
    static func androidKey(
        _ parts: RegistrationParts, credentialKey: SigningKey, authority: AttestationAuthority,
        challenge: [UInt8]? = nil, allApplications: Bool = false, certificateKey: SigningKey? = nil
    ) throws -> CBOR {
        let signer = certificateKey ?? credentialKey
        let cdh = Digest.sha256(parts.clientDataJSON)
        var tee = DERWriter.explicit(1, DERWriter.tlv(0x31, DERWriter.integer(2)))
        if allApplications { tee += DERWriter.explicit(600, DERWriter.null()) }
        tee += DERWriter.explicit(702, DERWriter.integer(0))
        let description = DERWriter.sequence(
            DERWriter.integer(300), DERWriter.enumerated(1), DERWriter.integer(300), DERWriter.enumerated(1),
            DERWriter.octets(challenge ?? cdh), DERWriter.octets([]), DERWriter.sequence(), DERWriter.sequence(tee))
        var b = CertificateBuilder(subject: [("CN", "Android Keystore Key")])
        b.extensions = [(X509Certificate.OID.androidKeyDescription, false, description)]
        let cert = try authority.issue(b, for: signer)
        return .map([
            CBORPair(.text("alg"), CBOR(signer.algorithm.rawValue)),
            CBORPair(.text("sig"), .bytes(try signer.sign(parts.authenticatorData.bytes, cdh))),
            CBORPair(.text("x5c"), .array([.bytes(cert.der), .bytes(authority.root.der)])),
        ])
    }

    /// `tpm` (§8.3): a TPMT_PUBLIC for the credential key (ECC P-256 for ES256,
    /// RSA for RS256), a TPMS_ATTEST certifying it, signed by the AIK, and the AIK certificate.
    ///
    /// With `sha1`, an RSA AIK signs with RS1 and extraData is the SHA-1 of
    /// attToBeSigned, as many Windows Hello TPMs do.
    static func tpm(
        _ parts: RegistrationParts, authority: AttestationAuthority, extraData: [UInt8]? = nil, aikEKU: Bool = true,
        sha1: Bool = false
    ) throws -> CBOR {
        guard let attested = parts.authenticatorData.attested else { throw WebAuthnError(.configurationInvalid, "tpm needs a credential") }
        func u16(_ value: some BinaryInteger) -> [UInt8] { let v = Int(value); return [UInt8(v >> 8 & 0xff), UInt8(v & 0xff)] }
        func sized(_ b: [UInt8]) -> [UInt8] { u16(b.count) + b }
        let key = attested.publicKey
        func u32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24 & 0xff), UInt8(v >> 16 & 0xff), UInt8(v >> 8 & 0xff), UInt8(v & 0xff)] }
        // TPMA_OBJECT: fixedTPM, fixedParent, sensitiveDataOrigin, userWithAuth, noDA, decrypt, sign.
        let objectAttributes: UInt32 = 0x0006_0472
        let header = u32(objectAttributes) + sized([]) + u16(TPM.Alg.null)  // objectAttributes, authPolicy, symmetric NULL
        let pubArea: [UInt8]
        if key[COSE.Label.kty]?.intValue == COSE.KeyType.rsa, let n = key[COSE.Label.n]?.bytesValue, let e = key[COSE.Label.e]?.bytesValue {
            let exponent = e.reduce(0) { $0 << 8 | Int($1) }
            let e32: [UInt8] =
                exponent == 65537
                ? [0, 0, 0, 0] : [UInt8(exponent >> 24 & 0xff), UInt8(exponent >> 16 & 0xff), UInt8(exponent >> 8 & 0xff), UInt8(exponent & 0xff)]
            pubArea = u16(TPM.Alg.rsa) + u16(TPM.Alg.sha256) + header + u16(TPM.Alg.null) + u16(n.count * 8) + e32 + sized(n)
        } else if let x = key[COSE.Label.x]?.bytesValue, let y = key[COSE.Label.y]?.bytesValue, x.count == ECCurve.p256.coordinateSize {
            pubArea = u16(TPM.Alg.ecc) + u16(TPM.Alg.sha256) + header + u16(TPM.Alg.null) + u16(TPM.ECCCurve.nistP256) + u16(TPM.Alg.null) + sized(x) + sized(y)
        } else {
            throw WebAuthnError(.configurationInvalid, "tpm here needs an ES256 or RSA credential")
        }
        let name = u16(TPM.Alg.sha256) + Digest.sha256(pubArea)
        let certInfo =
            u32(TPM.generatedValue) + u16(TPM.stAttestCertify) + sized([])
            + sized(extraData ?? Digest.hash(sha1 ? .sha1 : .sha256, parts.authenticatorData.bytes, Digest.sha256(parts.clientDataJSON)))
            + [UInt8](repeating: 0, count: TPM.clockInfoSize) + [UInt8](repeating: 0, count: 8) + sized(name) + sized(name)  // clockInfo, firmwareVersion
        let aikKey = sha1 ? try SigningKey.generate(.rs1) : authority.attestationKey
        var aik = try authority.aikCertificate(aaguid: attested.aaguid, key: aikKey)
        if !aikEKU {
            var b = CertificateBuilder()
            b.extensions = [
                (X509Certificate.OID.subjectAltName, true, DERWriter.tpmSAN()), (X509Certificate.OID.basicConstraints, true, DERWriter.basicConstraintsCAFalse),
            ]
            aik = try authority.issue(b, for: aikKey)
        }
        return .map([
            CBORPair(.text("ver"), .text("2.0")), CBORPair(.text("alg"), CBOR(aikKey.algorithm.rawValue)),
            CBORPair(.text("x5c"), .array([.bytes(aik.der)])), CBORPair(.text("sig"), .bytes(try aikKey.sign(certInfo))),
            CBORPair(.text("certInfo"), .bytes(certInfo)), CBORPair(.text("pubArea"), .bytes(pubArea)),
        ])
    }
}

/// Signs compact JWSs (RS256) as SafetyNet and FIDO MDS3 BLOBs carry them: x5c in the header.

package enum JWSWriter {
    package static func compact(
        _ payload: JSONValue, key: SigningKey, x5c: [X509Certificate], type: String? = nil, extraHeader: JSONObject = [:]
    ) throws -> [UInt8] {
        var header: JSONObject = ["alg": "RS256", "x5c": .array(x5c.map { .string(Data($0.der).base64EncodedString()) })]
        if let type { header["typ"] = .string(type) }
        for member in extraHeader.members { header[member.key] = member.value }
        let input = Array((Base64URL.encode(JSONValue.object(header).serializedBytes()) + "." + Base64URL.encode(payload.serializedBytes())).utf8)
        return input + Array(".".utf8) + Array(Base64URL.encode(try key.sign(input)).utf8)
    }
}

extension CertificateBuilder {
    /// A CA certificate template: subject C, O, CN and basic constraints CA true.
    package static func certificateAuthority(organization: String, name: String) -> CertificateBuilder {
        var b = CertificateBuilder(subject: [("C", "AA"), ("O", organization), ("CN", name)])
        b.extensions = [(X509Certificate.OID.basicConstraints, true, DERWriter.basicConstraintsCATrue)]
        return b
    }
}
